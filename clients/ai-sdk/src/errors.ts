/**
 * Errors of the adapter, following the AI SDK's conventions: every class extends `AISDKError`
 * (from `ai`), carries a `name` starting with `AI_Toolgate` and a marker symbol, and has a
 * static `isInstance(error)` that works across package copies.
 *
 *     ToolgateError                        base (marker vercel.ai.error.AI_ToolgateError)
 *     ├── ToolgateApiError                 the gateway's error body: code, statusCode, isRetryable,
 *     │                                    requestId, details, retryAfterSeconds
 *     ├── ToolgateNetworkError             no response (refused, reset, timed out); `sent`
 *     ├── ToolgateUnexpectedResponseError  a response that is not the gateway's JSON
 *     ├── ToolgateDeniedError              a guarded execute was refused (policy or approver)
 *     ├── ToolgateApprovalRequiredError    a guarded execute was reached while approval is pending
 *     ├── ToolgateReplayedFailureError     the call ran before and failed for good
 *     └── ToolgateReportError              the tool ran but its outcome could not be reported
 *
 * `attempts` (on the first three) counts the requests one logical call made. Thrown inside a
 * tool's `execute`, these become the SDK's `tool-error` parts, which the model sees.
 */
import { AISDKError } from 'ai';

const PREFIX = 'vercel.ai.error.';
const BASE_NAME = 'AI_ToolgateError';
const baseSymbol = Symbol.for(PREFIX + BASE_NAME);

function hasMarker(error: unknown, name: string): boolean {
  const marker = Symbol.for(PREFIX + name);
  return error != null && typeof error === 'object' && marker in error && (error as Record<symbol, unknown>)[marker] === true;
}

function mark(error: object, name: string): void {
  Object.defineProperty(error, Symbol.for(PREFIX + name), { value: true, enumerable: false });
}

export class ToolgateError extends AISDKError {
  private readonly [baseSymbol] = true;
  /** Requests made by the logical call that failed (1 unless retried). */
  attempts = 1;

  constructor({ name, message, cause }: { name: string; message: string; cause?: unknown }) {
    super({ name, message, cause });
    mark(this, name);
  }

  static override isInstance(error: unknown): error is ToolgateError {
    return hasMarker(error, BASE_NAME);
  }
}

export class ToolgateApiError extends ToolgateError {
  static readonly errorName = 'AI_ToolgateApiError';
  readonly code: string;
  readonly statusCode: number;
  readonly isRetryable: boolean;
  readonly requestId: string | undefined;
  readonly details: unknown;
  readonly retryAfterSeconds: number | undefined;
  /** The gateway's safe message. */
  readonly gatewayMessage: string;

  constructor(options: {
    code: string;
    statusCode: number;
    message: string;
    isRetryable: boolean;
    requestId?: string;
    details?: unknown;
    retryAfterSeconds?: number;
  }) {
    super({
      name: ToolgateApiError.errorName,
      message: `toolgate ${options.code} (${options.statusCode}): ${options.message} [request ${options.requestId ?? '-'}]`,
    });
    this.code = options.code;
    this.statusCode = options.statusCode;
    this.isRetryable = options.isRetryable;
    this.requestId = options.requestId;
    this.details = options.details;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.gatewayMessage = options.message;
  }

  static override isInstance(error: unknown): error is ToolgateApiError {
    return hasMarker(error, ToolgateApiError.errorName);
  }
}

export class ToolgateNetworkError extends ToolgateError {
  static readonly errorName = 'AI_ToolgateNetworkError';
  /** False when the request certainly never reached the gateway (connection refused). */
  readonly sent: boolean;

  constructor({ message, sent, cause }: { message: string; sent: boolean; cause?: unknown }) {
    super({ name: ToolgateNetworkError.errorName, message, cause });
    this.sent = sent;
  }

  static override isInstance(error: unknown): error is ToolgateNetworkError {
    return hasMarker(error, ToolgateNetworkError.errorName);
  }
}

export class ToolgateUnexpectedResponseError extends ToolgateError {
  static readonly errorName = 'AI_ToolgateUnexpectedResponseError';
  readonly statusCode: number;
  readonly requestId: string | undefined;

  constructor({ message, statusCode, requestId }: { message: string; statusCode: number; requestId?: string }) {
    super({ name: ToolgateUnexpectedResponseError.errorName, message: `${message} (HTTP ${statusCode})` });
    this.statusCode = statusCode;
    this.requestId = requestId;
  }

  static override isInstance(error: unknown): error is ToolgateUnexpectedResponseError {
    return hasMarker(error, ToolgateUnexpectedResponseError.errorName);
  }
}

export class ToolgateDeniedError extends ToolgateError {
  static readonly errorName = 'AI_ToolgateDeniedError';
  readonly toolName: string;
  readonly reasons: string[];
  readonly decisionId: string | undefined;

  constructor({ toolName, reasons, decisionId }: { toolName: string; reasons: string[]; decisionId?: string }) {
    super({ name: ToolgateDeniedError.errorName, message: `${toolName} denied: ${reasons.join('; ') || 'no reason given'}` });
    this.toolName = toolName;
    this.reasons = reasons;
    this.decisionId = decisionId;
  }

  static override isInstance(error: unknown): error is ToolgateDeniedError {
    return hasMarker(error, ToolgateDeniedError.errorName);
  }
}

export class ToolgateApprovalRequiredError extends ToolgateError {
  static readonly errorName = 'AI_ToolgateApprovalRequiredError';
  readonly toolName: string;
  readonly approvalId: string;
  readonly reason: string;

  constructor({ toolName, approvalId, reason }: { toolName: string; approvalId: string; reason: string }) {
    super({ name: ToolgateApprovalRequiredError.errorName, message: `${toolName} needs approval: ${reason}` });
    this.toolName = toolName;
    this.approvalId = approvalId;
    this.reason = reason;
  }

  static override isInstance(error: unknown): error is ToolgateApprovalRequiredError {
    return hasMarker(error, ToolgateApprovalRequiredError.errorName);
  }
}

export class ToolgateReplayedFailureError extends ToolgateError {
  static readonly errorName = 'AI_ToolgateReplayedFailureError';
  readonly key: string;
  readonly failureReason: string | undefined;

  constructor({ key, failureReason }: { key: string; failureReason?: string }) {
    super({ name: ToolgateReplayedFailureError.errorName, message: `this call failed before: ${failureReason ?? 'no reason recorded'}` });
    this.key = key;
    this.failureReason = failureReason;
  }

  static override isInstance(error: unknown): error is ToolgateReplayedFailureError {
    return hasMarker(error, ToolgateReplayedFailureError.errorName);
  }
}

export class ToolgateReportError extends ToolgateError {
  static readonly errorName = 'AI_ToolgateReportError';
  readonly key: string;
  /** What the tool returned (undefined after a tool failure). */
  readonly result: unknown;

  constructor({ key, result, cause }: { key: string; result: unknown; cause: unknown }) {
    super({ name: ToolgateReportError.errorName, message: `the outcome of call ${JSON.stringify(key)} could not be reported`, cause });
    this.key = key;
    this.result = result;
  }

  static override isInstance(error: unknown): error is ToolgateReportError {
    return hasMarker(error, ToolgateReportError.errorName);
  }
}
