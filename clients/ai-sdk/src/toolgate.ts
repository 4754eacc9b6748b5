/**
 * `createToolgate(options)`: the gateway wired into an AI SDK 7 agent.
 *
 *     const toolgate = createToolgate({ baseUrl, token });
 *     const agent = new ToolLoopAgent({
 *       model, tools: toolgate.guardTools({ readFile, processPayment }),
 *       toolApproval: toolgate.toolApproval,
 *     });
 *
 * - `toolApproval` (the SDK's generic approval function) asks `POST /v1/decide` for each tool
 *   call and returns the gateway's verdict as the SDK's status: allow -> `not-applicable` (or
 *   `approved` after a grant), deny -> `denied` with the reasons, user-approval ->
 *   `user-approval` with the policy's reason for the approver. Gateway errors (after the retry
 *   rules) are `denied` with a reason naming the code: a call never runs without a decision.
 *   A tool's own `needsApproval` (boolean or function), which the SDK ignores once
 *   `toolApproval` is a function, still asks a person: the stricter of the two wins (the
 *   gateway is asked with a dry run first, so that a denied call is not shown to anyone).
 * - `guardTools` / `guard` wrap each tool's `execute`: it runs only on allow with a fresh
 *   reservation (or without a key, for read-only contracts), returns the stored result on a
 *   replay, and reports `complete` or `fail` with the reservation token. It uses the decision
 *   `toolApproval` just made for the same tool call id, or asks itself.
 * - `answerApprovals(messages, { token })` sends the approver's answers of the
 *   `tool-approval-response` turn to `POST /v1/approvals/<id>` under the approver's token; on
 *   the next `generate`, `toolApproval` picks the grant up as the requester
 *   (`GET /v1/approvals/<id>`) and repeats the call with it: allowed once, and a retried turn
 *   presents the same grant and key and gets the stored result.
 *
 * Idempotency key of a call, for contracts marked `mutating` and for unregistered tools (read
 * from `GET /v1/tools` once): the contract's key field when the input has it (no header: the
 * gateway takes it from the input), else `derivedKey` (keys.ts), which a regenerated step
 * shares. The gateway approval of a call and its grant are kept in `approvals` (in memory by
 * default) under that key (the tool call id for calls without one): an app whose turns run in
 * several processes passes a shared store.
 */
import { createHash } from 'node:crypto';

import type { ModelMessage, Tool, ToolApprovalStatus, ToolExecutionOptions } from 'ai';

import { type ClientOptions, ToolgateClient, type TokenSource } from './client.js';
import {
  ToolgateApiError,
  ToolgateApprovalRequiredError,
  ToolgateDeniedError,
  ToolgateError,
  ToolgateReplayedFailureError,
  ToolgateReportError,
} from './errors.js';
import { executableInput } from './inputs.js';
import { conversationBefore, derivedKey } from './keys.js';
import { approvalResponses, approvedResponseFor, type CallInHistory } from './messages.js';
import type { ApprovalResult, Decision, IdempotencyInfo, ToolContract } from './wire.js';

/** A tool call as the gateway sees it. */
export type GatewayCall = CallInHistory;

/**
 * The gateway approval opened for one call, its grant once read, and the tool call id it is
 * bound to (a regenerated step repeats the call under that id, so that it finds the same
 * approval instead of opening another).
 */
export interface ApprovalLink {
  approvalId: string;
  toolCallId: string;
  grant?: string;
}

/** Where approval links are kept between turns, by the call's idempotency key (else its tool call id). */
export interface ApprovalLinks {
  get(callKey: string): ApprovalLink | undefined | Promise<ApprovalLink | undefined>;
  set(callKey: string, link: ApprovalLink): unknown;
}

export interface ToolgateOptions extends ClientOptions {
  /** Contract version per tool name (default `"1"`). */
  versions?: Record<string, string>;
  /**
   * The idempotency key of a call without a contract key field in its input (default
   * `derivedKey`, keys.ts). `conversation`: the messages that led to the step. Same call, same key.
   */
  idempotencyKey?: (call: GatewayCall, conversation: ModelMessage[]) => string;
  /** Whether a call sends a key (default: the contract is `mutating`, or unregistered). */
  keyed?: (toolName: string, version: string) => boolean | Promise<boolean>;
  /** The decide call's `context` (e.g. `{ conversation_id }`); caller-supplied, untrusted. */
  context?: (call: GatewayCall) => Record<string, unknown> | undefined;
  /** Tool errors reported as `fail(retryable: true)` (default: `RetryableToolError`). */
  isRetryableToolError?: (error: unknown) => boolean;
  /** The reported failure reason (default: the error's name only; it is stored in the decision log). */
  failureReason?: (error: unknown) => string;
  /** Approval links store (default: in memory, this process). */
  approvals?: ApprovalLinks;
}

/** Throw it from a tool for a transient failure: the key is released and a retry runs the tool. */
export class RetryableToolError extends Error {
  override name = 'RetryableToolError';
}

/** What `answerApprovals` did for one `tool-approval-response`. */
export interface AnsweredApproval {
  toolCallId: string;
  approvalId: string;
  approved: boolean;
  state: ApprovalResult['approval']['state'];
}

const DENIED_WITHOUT_REASON = 'the approver rejected this call';
const NOT_JSON = "the tool's result is not a JSON value";
const OUTPUT_REJECTED = "the tool's result does not match the contract's output schema";
const STREAMING = 'streaming tool results are not supported by the toolgate guard';
const TOOL_ASKS = "this tool asks for a person's approval";
const PRINTABLE = /^[\x21-\x7e]+$/;
const MEMORY_LIMIT = 10_000;

/** A `Map` that forgets its oldest entries beyond `MEMORY_LIMIT`. */
class BoundedMap<V> extends Map<string, V> {
  override set(key: string, value: V): this {
    this.delete(key);
    super.set(key, value);
    if (this.size > MEMORY_LIMIT) this.delete(this.keys().next().value as string);
    return this;
  }
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** A tool call id the gateway accepts (printable ASCII, 1-128), hashed when it is not. */
function wireCallId(toolCallId: string): string {
  return PRINTABLE.test(toolCallId) && toolCallId.length <= 128 ? toolCallId : 'sha256:' + sha256(toolCallId).slice(0, 56);
}

/** How the gateway knows a call: its tool call id on the wire, and its idempotency key. */
interface Keyed {
  call: GatewayCall;
  version: string;
  /** The idempotency key (the key field's value, or the derived key); undefined: not keyed. */
  key: string | undefined;
  /** Whether the key goes in the `Idempotency-Key` header (not when the input's key field carries it). */
  header: boolean;
  /** Where the call's approval link is kept: its key, else its tool call id. */
  linkKey: string;
}

type SdkTool = Tool<any, any, any>;

/** Whether the tool's own `needsApproval` asks for a person for this call (SDK semantics). */
async function toolNeedsApproval(tool: SdkTool | undefined, call: GatewayCall, messages: ModelMessage[], context: unknown): Promise<boolean> {
  const needs = tool?.needsApproval;
  if (typeof needs === 'function') return needs(call.input, { toolCallId: call.toolCallId, messages, context });
  return needs === true;
}

function joined(reasons: string[]): string {
  return reasons.join('; ');
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return value != null && typeof (value as Record<symbol, unknown>)[Symbol.asyncIterator] === 'function';
}

/** Why an approval shown to its requester gives no grant (undefined: approved, grant present). */
function refusalOf(shown: ApprovalResult): string | undefined {
  const { approval, grant } = shown;
  switch (approval.state) {
    case 'approved':
      return grant ? undefined : 'the approval grant is not available to this caller';
    case 'denied':
      return approval.answer?.reason || DENIED_WITHOUT_REASON;
    case 'pending':
      return "the call is still waiting for an approver's answer at the gateway";
    case 'expired':
      return 'the approval expired';
    case 'used':
      return 'the approval grant was already used by another call';
  }
}

/** The reason given to the model when the gateway could not decide. */
function errorReason(error: unknown): string {
  if (ToolgateApiError.isInstance(error)) return `toolgate could not decide: ${error.code} (request ${error.requestId ?? '-'})`;
  if (ToolgateError.isInstance(error)) return `toolgate could not decide: ${error.name}`;
  throw error;
}

export class Toolgate {
  readonly client: ToolgateClient;
  private readonly options: ToolgateOptions;
  private readonly links: ApprovalLinks;
  /** Decisions made by `toolApproval`, waiting for the same call's `execute`. */
  private readonly handoff = new BoundedMap<Decision>();
  private contracts: Promise<Map<string, ToolContract>> | undefined;

  constructor(options: ToolgateOptions) {
    this.options = options;
    this.client = new ToolgateClient(options);
    this.links = options.approvals ?? new BoundedMap<ApprovalLink>();
  }

  /** The AI SDK's generic approval function (`toolApproval` of `ToolLoopAgent`, `generateText`, `streamText`). */
  readonly toolApproval = async ({ toolCall, messages, tools, toolsContext }: {
    toolCall: GatewayCall;
    messages: ModelMessage[];
    tools?: Record<string, SdkTool> | undefined;
    toolsContext?: unknown;
  }): Promise<ToolApprovalStatus> => {
    const call = { toolName: toolCall.toolName, toolCallId: toolCall.toolCallId, input: toolCall.input };
    try {
      const keyed = await this.keyed(call, conversationBefore(messages, call.toolCallId));
      if (approvedResponseFor(messages, call.toolCallId)) return await this.decideApproved(keyed);
      const tool = tools?.[call.toolName];
      const context = (toolsContext as Record<string, unknown> | undefined)?.[call.toolName];
      if (await toolNeedsApproval(tool, call, messages, context)) {
        const preview = await this.decide(keyed, { dryRun: true });
        if (preview.decision === 'allow') return { type: 'user-approval', reason: TOOL_ASKS };
        if (preview.decision === 'deny') return { type: 'denied', reason: joined(preview.reasons) };
      }
      return await this.status(...await this.decideLinked(keyed), call.toolCallId);
    } catch (error) {
      return { type: 'denied', reason: errorReason(error) };
    }
  };

  /**
   * The members of `tools` the caller may use at all (`GET /v1/capabilities`, version `1` unless
   * `versions` names another): hand these to the model, so that it is not offered a tool every
   * call of which would be denied. Each call is still decided in full. Throws like the client
   * when the gateway cannot answer (fail closed: offer nothing then).
   */
  async usableTools<TOOLS extends Record<string, Tool<any, any, any>>>(tools: TOOLS): Promise<Partial<TOOLS>> {
    const usable = new Set((await this.client.listCapabilities()).map(t => `${t.name}@${t.version}`));
    return Object.fromEntries(
      Object.entries(tools).filter(([name]) => usable.has(`${name}@${this.options.versions?.[name] ?? '1'}`)),
    ) as Partial<TOOLS>;
  }

  /** `tools` with every `execute` guarded (tools without one are kept as they are). */
  guardTools<TOOLS extends Record<string, Tool<any, any, any>>>(tools: TOOLS): TOOLS {
    return Object.fromEntries(
      Object.entries(tools).map(([name, tool]) => [name, tool.execute ? this.guard(name, tool) : tool]),
    ) as TOOLS;
  }

  /** `tool` (named `toolName` in the tool set) with its `execute` guarded. */
  guard<TOOL extends Tool<any, any, any>>(toolName: string, tool: TOOL): TOOL {
    const execute = tool.execute;
    if (execute === undefined) throw new TypeError(`tool ${toolName} has no execute function to guard`);
    return {
      ...tool,
      execute: (input: unknown, options: ToolExecutionOptions<any>) => this.runGuarded(toolName, input, options, execute),
    } as TOOL;
  }

  /**
   * Send the approver's answers of the last `tool-approval-response` message to the gateway
   * under the approver's `token`. Throws `ToolgateApiError` when the gateway refuses (403: no
   * approver role, or the requester's own call; 409: already answered or expired), and
   * `ToolgateError` for an answer to a call whose gateway approval this process does not know.
   */
  async answerApprovals(messages: ModelMessage[], { token }: { token: TokenSource }): Promise<AnsweredApproval[]> {
    const approver = new ToolgateClient({ ...this.options, token });
    const answered: AnsweredApproval[] = [];
    for (const response of approvalResponses(messages)) {
      const conversation = conversationBefore(messages, response.toolCall.toolCallId);
      const link = await this.links.get((await this.keyed(response.toolCall, conversation)).linkKey);
      if (link === undefined) {
        throw new ToolgateError({
          name: 'AI_ToolgateError',
          message: `no gateway approval is known for tool call ${response.toolCall.toolCallId}; share the approvals store between processes`,
        });
      }
      const result = await approver.answerApproval(link.approvalId, response.approved, response.reason ?? '');
      answered.push({
        toolCallId: response.toolCall.toolCallId, approvalId: link.approvalId, approved: response.approved,
        state: result.approval.state,
      });
    }
    return answered;
  }

  /** How the gateway knows `call` (see `Keyed`); `conversation`: the messages that led to its step. */
  private async keyed(call: GatewayCall, conversation: ModelMessage[]): Promise<Keyed> {
    const version = this.options.versions?.[call.toolName] ?? '1';
    const isKeyed = this.options.keyed
      ? await this.options.keyed(call.toolName, version)
      : (await this.contract(call.toolName, version))?.mutating ?? true;
    const field = isKeyed ? (await this.contract(call.toolName, version))?.idempotency_key_field : undefined;
    const fieldValue = field ? (call.input as Record<string, unknown> | null)?.[field] : undefined;
    let key: string | undefined;
    let header = false;
    if (isKeyed && fieldValue != null) {
      key = String(fieldValue);
    } else if (isKeyed) {
      key = (this.options.idempotencyKey ?? ((c, m) => derivedKey(c.toolName, version, c.input, m)))(call, conversation);
      header = true;
    }
    return { call, version, key, header, linkKey: key ?? `call:${call.toolCallId}` };
  }

  /**
   * Decide `keyed`, or, when an earlier generation of the same call opened an approval, the
   * call under the tool call id that approval is bound to, with its grant once read. Returns
   * the call as asked and the decision.
   */
  private async decideLinked(keyed: Keyed): Promise<[Keyed, Decision]> {
    const link = await this.links.get(keyed.linkKey);
    if (link === undefined) return [keyed, await this.decide(keyed)];
    const asked = this.boundTo(keyed, link);
    return [asked, await this.decide(asked, link.grant ? { approval: { approval_id: link.approvalId, grant: link.grant } } : {})];
  }

  /** Keep the approval a `user-approval` decision opened for `keyed`. */
  private async link(keyed: Keyed, decision: Decision): Promise<void> {
    await this.links.set(keyed.linkKey, { approvalId: decision.approval!.approval_id, toolCallId: keyed.call.toolCallId });
  }

  /** `keyed` repeated under the tool call id its approval is bound to. */
  private boundTo(keyed: Keyed, link: ApprovalLink): Keyed {
    return { ...keyed, call: { ...keyed.call, toolCallId: link.toolCallId } };
  }

  private async decide(
    { call, version, key, header }: Keyed,
    { approval, dryRun }: { approval?: { approval_id: string; grant: string }; dryRun?: boolean } = {},
  ): Promise<Decision> {
    const context = this.options.context?.(call);
    return this.client.decide({
      tool: call.toolName,
      version,
      toolCallId: wireCallId(call.toolCallId),
      input: call.input as Record<string, unknown>,
      ...(header && key !== undefined && !dryRun ? { idempotencyKey: key } : {}),
      ...(context !== undefined ? { context } : {}),
      ...(approval !== undefined ? { approval } : {}),
      ...(dryRun ? { dryRun } : {}),
    });
  }

  private async contract(toolName: string, version: string): Promise<ToolContract | undefined> {
    this.contracts ??= this.client.listTools().then(
      tools => new Map(tools.map(t => [`${t.name}@${t.version}`, t])),
      error => {
        this.contracts = undefined;
        throw error;
      },
    );
    return (await this.contracts).get(`${toolName}@${version}`);
  }

  /** The SDK status of a decision; an allow is handed to the call's `execute` (by the SDK's tool call id). */
  private async status(keyed: Keyed, decision: Decision, toolCallId = keyed.call.toolCallId): Promise<ToolApprovalStatus> {
    switch (decision.decision) {
      case 'allow':
        this.handoff.set(toolCallId, decision);
        return decision.ai_sdk_status === 'approved' ? { type: 'approved', reason: joined(decision.reasons) } : 'not-applicable';
      case 'deny':
        return { type: 'denied', reason: joined(decision.reasons) };
      case 'user-approval':
        await this.link(keyed, decision);
        return { type: 'user-approval', reason: decision.approval!.request_reason };
    }
  }

  /** The approval-response turn: the grant (read as the requester) makes the call allowed once. */
  private async decideApproved(keyed: Keyed): Promise<ToolApprovalStatus> {
    const sdkCallId = keyed.call.toolCallId;
    let link = await this.links.get(keyed.linkKey);
    if (link === undefined) {
      const decision = await this.decide(keyed);
      if (decision.decision !== 'user-approval') return this.status(keyed, decision);
      await this.link(keyed, decision);
      link = { approvalId: decision.approval!.approval_id, toolCallId: sdkCallId };
    }
    const bound = this.boundTo(keyed, link);
    let grant = link.grant;
    if (grant === undefined) {
      const shown = await this.client.getApproval(link.approvalId);
      const refusal = refusalOf(shown);
      if (refusal !== undefined) return await this.settledInstead(bound, sdkCallId) ?? { type: 'denied', reason: refusal };
      grant = shown.grant!;
      await this.links.set(keyed.linkKey, { ...link, grant });
    }
    const decision = await this.decide(bound, { approval: { approval_id: link.approvalId, grant } });
    if (decision.decision === 'user-approval') return { type: 'denied', reason: decision.approval!.request_reason };
    return this.status(bound, decision, sdkCallId);
  }

  /**
   * A call whose grant is gone (used, in another process) may have run already: its key then
   * replays the stored result (the gateway opens no new approval for a settled key).
   */
  private async settledInstead(keyed: Keyed, sdkCallId: string): Promise<ToolApprovalStatus | undefined> {
    if (keyed.key === undefined) return undefined;
    const decision = await this.decide(keyed);
    if (decision.decision !== 'allow' || decision.idempotency?.state !== 'replayed') return undefined;
    return this.status(keyed, decision, sdkCallId);
  }

  private async runGuarded(
    toolName: string,
    input: unknown,
    options: ToolExecutionOptions<any>,
    execute: NonNullable<Tool<any, any, any>['execute']>,
  ): Promise<unknown> {
    const call = { toolName, toolCallId: options.toolCallId, input };
    let decision = this.handoff.get(call.toolCallId);
    this.handoff.delete(call.toolCallId);
    if (decision === undefined) {
      const [asked, decided] = await this.decideLinked(await this.keyed(call, conversationBefore(options.messages, call.toolCallId)));
      if (decided.decision === 'user-approval') await this.link(asked, decided);
      decision = decided;
    }
    if (decision.decision === 'deny') {
      throw new ToolgateDeniedError({ toolName, reasons: decision.reasons, decisionId: decision.decision_id });
    }
    if (decision.decision === 'user-approval') {
      const approval = decision.approval!;
      throw new ToolgateApprovalRequiredError({ toolName, approvalId: approval.approval_id, reason: approval.request_reason });
    }
    const idempotency = decision.idempotency;
    const runInput = executableInput(decision.input, input);
    if (idempotency == null) return execute(runInput, options);
    if (idempotency.state === 'replayed') {
      if (idempotency.outcome === 'failed') {
        throw new ToolgateReplayedFailureError({ key: idempotency.key, ...(idempotency.failure_reason ? { failureReason: idempotency.failure_reason } : {}) });
      }
      return idempotency.result;
    }
    return this.runReserved(runInput, options, execute, idempotency);
  }

  private async runReserved(
    input: Record<string, unknown>,
    options: ToolExecutionOptions<any>,
    execute: NonNullable<Tool<any, any, any>['execute']>,
    reserved: IdempotencyInfo,
  ): Promise<unknown> {
    let result: unknown;
    try {
      result = await execute(input, options);
    } catch (error) {
      const retryable = (this.options.isRetryableToolError ?? (e => e instanceof RetryableToolError))(error);
      const reason = (this.options.failureReason ?? (e => `tool raised ${(e as Error)?.name || typeof e}`))(error);
      await this.reportFailure(reserved, retryable, reason.slice(0, 500) || 'tool failed', undefined);
      throw error;
    }
    if (isAsyncIterable(result)) {
      await this.reportFailure(reserved, true, STREAMING, undefined);
      throw new ToolgateError({ name: 'AI_ToolgateError', message: STREAMING });
    }
    try {
      JSON.stringify(result ?? null);
    } catch (error) {
      await this.reportFailure(reserved, false, NOT_JSON, result);
      throw error;
    }
    try {
      await this.client.complete(reserved.key, result ?? null, reserved.reservation_token);
    } catch (error) {
      if (ToolgateApiError.isInstance(error) && error.code === 'VALIDATION_ERROR') {
        await this.reportFailure(reserved, false, OUTPUT_REJECTED, result);
        throw error;
      }
      throw new ToolgateReportError({ key: reserved.key, result, cause: error });
    }
    return result;
  }

  private async reportFailure(reserved: IdempotencyInfo, retryable: boolean, reason: string, result: unknown): Promise<void> {
    try {
      await this.client.fail(reserved.key, retryable, reason, reserved.reservation_token);
    } catch (error) {
      throw new ToolgateReportError({ key: reserved.key, result, cause: error });
    }
  }
}

/** See the module documentation. */
export function createToolgate(options: ToolgateOptions): Toolgate {
  return new Toolgate(options);
}
