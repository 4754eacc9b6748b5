/**
 * The gateway's JSON answers used by the adapter (README "Trying it", "Retries and
 * idempotency", "Human approvals"), and the checks that a body has the members relied on.
 * Members the gateway adds later are kept and ignored.
 */
import { ToolgateUnexpectedResponseError } from './errors.js';

export type DecisionWord = 'allow' | 'deny' | 'user-approval';
export type AiSdkStatus = 'not-applicable' | 'approved' | 'denied' | 'user-approval';

export interface IdempotencyInfo {
  key: string;
  state: 'reserved' | 'replayed';
  replayed: boolean;
  reservation_token?: string | null;
  lease_expires_at?: string | null;
  outcome?: 'completed' | 'failed' | null;
  result?: unknown;
  failure_reason?: string | null;
}

export interface Decision {
  decision: DecisionWord;
  reasons: string[];
  decision_id: string;
  request_id: string;
  policy_revision: string;
  tool: { name: string; version: string };
  /** The input as the contract normalized it: what the policy decided on. */
  input: Record<string, unknown>;
  approval?: { approval_id: string; request_reason: string; expires_at: string } | null;
  idempotency?: IdempotencyInfo | null;
  ai_sdk_status?: AiSdkStatus | null;
}

export interface ApprovalAnswer {
  approved: boolean;
  reason: string;
  approver: string;
  answered_at: string;
  decision_id: string;
}

export interface Approval {
  approval_id: string;
  state: 'pending' | 'approved' | 'denied' | 'used' | 'expired';
  tool: { name: string; version: string };
  tool_call_id: string | null;
  requester: string;
  request_reason: string;
  expires_at: string;
  answer?: ApprovalAnswer | null;
}

export interface ApprovalResult {
  approval: Approval;
  grant?: string | null;
  request_id: string;
}

export interface ExecutionReport {
  key: string;
  state: 'completed' | 'failed' | 'released';
  retention_expires_at?: string;
  request_id: string;
}

export interface ToolContract {
  name: string;
  version: string;
  mutating: boolean;
  /** The input member that carries the call's idempotency key (e.g. `clientMutationId`). */
  idempotency_key_field?: string | null;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function unexpected(what: string, body: Record<string, unknown>): never {
  const requestId = typeof body.request_id === 'string' ? body.request_id : undefined;
  throw new ToolgateUnexpectedResponseError({ message: `response is not ${what}`, statusCode: 200, requestId });
}

export function asDecision(body: Record<string, unknown>): Decision {
  const ok =
    ['allow', 'deny', 'user-approval'].includes(body.decision as string) &&
    Array.isArray(body.reasons) && body.reasons.every(r => typeof r === 'string') &&
    typeof body.decision_id === 'string' && isObject(body.input) &&
    (body.decision !== 'user-approval' || (isObject(body.approval) && typeof body.approval.approval_id === 'string')) &&
    (body.idempotency == null || (isObject(body.idempotency) && typeof body.idempotency.key === 'string' &&
      ['reserved', 'replayed'].includes(body.idempotency.state as string)));
  return ok ? (body as unknown as Decision) : unexpected('a decision', body);
}

export function asApprovalResult(body: Record<string, unknown>): ApprovalResult {
  const approval = body.approval;
  const ok = isObject(approval) && typeof approval.approval_id === 'string' &&
    ['pending', 'approved', 'denied', 'used', 'expired'].includes(approval.state as string) &&
    (body.grant == null || typeof body.grant === 'string');
  return ok ? (body as unknown as ApprovalResult) : unexpected('an approval', body);
}

export function asExecutionReport(body: Record<string, unknown>): ExecutionReport {
  const ok = typeof body.key === 'string' && ['completed', 'failed', 'released'].includes(body.state as string);
  return ok ? (body as unknown as ExecutionReport) : unexpected('an execution report', body);
}

export function asToolList(body: Record<string, unknown>): ToolContract[] {
  const tools = body.tools;
  const ok = Array.isArray(tools) && tools.every(t => isObject(t) && typeof t.name === 'string' &&
    typeof t.version === 'string' && typeof t.mutating === 'boolean');
  return ok ? (tools as ToolContract[]) : unexpected('a tool list', body);
}

export { isObject };
