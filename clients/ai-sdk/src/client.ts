/**
 * `ToolgateClient`: the gateway endpoints the adapter uses, over `fetch`, each call one
 * logical call under the retry rules of `retry.ts`. Every attempt sends the same body and
 * `Idempotency-Key`; the token is asked for again per attempt and never appears in an error.
 */
import { randomBytes } from 'node:crypto';

import { ToolgateApiError, ToolgateNetworkError, ToolgateUnexpectedResponseError } from './errors.js';
import { DEFAULT_RETRY, type RetryEvent, type RetryPolicy, runWithRetries } from './retry.js';
import {
  type ApprovalResult,
  asApprovalResult,
  asDecision,
  asExecutionReport,
  asToolList,
  type Decision,
  type ExecutionReport,
  isObject,
  type ToolContract,
} from './wire.js';

export type TokenSource = string | (() => string | Promise<string>);

export interface ClientOptions {
  /** The gateway, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** The caller's bearer token, or a function returning a current one. */
  token: TokenSource;
  /** Changes to `DEFAULT_RETRY`. */
  retry?: Partial<RetryPolicy>;
  /** Told before every retry (logs, metrics). */
  onRetry?: (event: RetryEvent) => void;
  /** Another `fetch` (a proxy-aware one, say). */
  fetch?: typeof fetch;
}

export interface DecideRequest {
  tool: string;
  version?: string;
  toolCallId?: string;
  input: Record<string, unknown>;
  idempotencyKey?: string;
  context?: Record<string, unknown>;
  approval?: { approval_id: string; grant: string };
  /** Ask without reserving a key or opening an approval (`dry_run`). */
  dryRun?: boolean;
}

/** Errors of `fetch` itself that mean the connection was never made. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

function retryAfterSeconds(header: string | null, body: unknown): number | undefined {
  if (header !== null) {
    const text = header.trim();
    if (/^\d+$/.test(text)) return Number(text);
    const when = Date.parse(text);
    if (!Number.isNaN(when)) return Math.max(0, (when - Date.now()) / 1000);
  }
  return typeof body === 'number' ? body : undefined;
}

async function errorOf(response: Response): Promise<ToolgateApiError | ToolgateUnexpectedResponseError> {
  const headerRequestId = response.headers.get('X-Request-Id') ?? undefined;
  let body: unknown;
  try {
    body = await response.json();
  } catch {
    body = undefined;
  }
  const error = isObject(body) ? body.error : undefined;
  if (!isObject(body) || !isObject(error) || typeof error.code !== 'string' || typeof error.message !== 'string' ||
      typeof error.retryable !== 'boolean') {
    return new ToolgateUnexpectedResponseError({
      message: "response without the gateway's error body", statusCode: response.status, requestId: headerRequestId,
    });
  }
  return new ToolgateApiError({
    code: error.code,
    statusCode: response.status,
    message: error.message,
    isRetryable: error.retryable,
    requestId: typeof body.request_id === 'string' ? body.request_id : headerRequestId,
    details: error.details,
    retryAfterSeconds: retryAfterSeconds(response.headers.get('Retry-After'), error.retry_after_seconds),
  });
}

function networkError(method: string, path: string, cause: unknown): ToolgateNetworkError {
  const code = (cause as { cause?: { code?: string } })?.cause?.code;
  return new ToolgateNetworkError({
    message: `${method} ${path}: ${code ?? (cause as Error)?.name ?? 'network error'}`,
    sent: !(code !== undefined && NOT_SENT.has(code)),
    cause,
  });
}

export class ToolgateClient {
  readonly baseUrl: string;
  private readonly token: TokenSource;
  private readonly policy: RetryPolicy;
  private readonly onRetry: ((event: RetryEvent) => void) | undefined;
  private readonly fetch: typeof fetch;

  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.token = options.token;
    this.policy = { ...DEFAULT_RETRY, ...options.retry };
    this.onRetry = options.onRetry;
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  /** `POST /v1/decide`. A deny or user-approval is a `Decision`, not an error. */
  async decide(request: DecideRequest): Promise<Decision> {
    const body: Record<string, unknown> = { tool: request.tool, version: request.version ?? '1', input: request.input };
    if (request.toolCallId !== undefined) body.tool_call_id = request.toolCallId;
    if (request.context !== undefined) body.context = request.context;
    if (request.approval !== undefined) body.approval = request.approval;
    if (request.dryRun) body.dry_run = true;
    const headers: Record<string, string> = request.idempotencyKey !== undefined ? { 'Idempotency-Key': request.idempotencyKey } : {};
    return asDecision(await this.call('POST', '/v1/decide', { body, headers }));
  }

  /** `POST /v1/executions/<key>/complete`: the tool ran and returned `result` (JSON). */
  async complete(key: string, result: unknown, reservationToken?: string | null): Promise<ExecutionReport> {
    const body: Record<string, unknown> = { result };
    if (reservationToken) body.reservation_token = reservationToken;
    return asExecutionReport(await this.call('POST', `/v1/executions/${encodeURIComponent(key)}/complete`, { body }));
  }

  /** `POST /v1/executions/<key>/fail`: `retryable` releases the key, otherwise the failure is kept. */
  async fail(key: string, retryable: boolean, reason: string, reservationToken?: string | null): Promise<ExecutionReport> {
    const body: Record<string, unknown> = { retryable, reason };
    if (reservationToken) body.reservation_token = reservationToken;
    return asExecutionReport(await this.call('POST', `/v1/executions/${encodeURIComponent(key)}/fail`, { body }));
  }

  /** `GET /v1/approvals/<id>` as the requester (who gets the grant while approved and unused) or an approver. */
  async getApproval(approvalId: string): Promise<ApprovalResult> {
    return asApprovalResult(await this.call('GET', `/v1/approvals/${encodeURIComponent(approvalId)}`, {}));
  }

  /** `POST /v1/approvals/<id>` as an approver. Not idempotent: retried only when never sent. */
  async answerApproval(approvalId: string, approved: boolean, reason = ''): Promise<ApprovalResult> {
    return asApprovalResult(await this.call('POST', `/v1/approvals/${encodeURIComponent(approvalId)}`, {
      body: { approved, reason: reason.slice(0, 500) }, idempotent: false,
    }));
  }

  /** `GET /v1/tools`: the registered contracts. */
  async listTools(): Promise<ToolContract[]> {
    return asToolList(await this.call('GET', '/v1/tools', {}));
  }

  /** `GET /v1/capabilities`: the registered contracts the caller's policy lets it use at all. */
  async listCapabilities(): Promise<ToolContract[]> {
    return asToolList(await this.call('GET', '/v1/capabilities', {}));
  }

  private async bearer(): Promise<string> {
    return typeof this.token === 'function' ? await this.token() : this.token;
  }

  private async call(
    method: string,
    path: string,
    { body, headers, idempotent = true }: { body?: unknown; headers?: Record<string, string>; idempotent?: boolean },
  ): Promise<Record<string, unknown>> {
    const requestId = 'tga-' + randomBytes(12).toString('hex');
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return runWithRetries(async (number, signal) => {
      let response: Response;
      try {
        response = await this.fetch(this.baseUrl + path, {
          method,
          body: payload,
          signal,
          headers: {
            ...headers,
            Authorization: `Bearer ${await this.bearer()}`,
            'X-Request-Id': number === 1 ? requestId : `${requestId}.${number}`,
            ...(payload !== undefined ? { 'Content-Type': 'application/json' } : {}),
          },
        });
      } catch (cause) {
        throw networkError(method, path, cause);
      }
      if (!response.ok) throw await errorOf(response);
      let answer: unknown;
      try {
        answer = await response.json();
      } catch (cause) {
        if (signal.aborted) throw networkError(method, path, cause);
        answer = undefined;
      }
      if (!isObject(answer)) {
        throw new ToolgateUnexpectedResponseError({
          message: 'success response is not a JSON object', statusCode: response.status,
          requestId: response.headers.get('X-Request-Id') ?? undefined,
        });
      }
      return answer;
    }, this.policy, { idempotent, ...(this.onRetry ? { onRetry: this.onRetry } : {}) });
  }
}
