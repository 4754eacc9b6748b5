/**
 * @toolgate/ai-sdk: toolgate for the Vercel AI SDK 7 (`ai` >= 7, Node.js >= 22).
 *
 * - `createToolgate` / `Toolgate`: `toolApproval`, `guardTools` / `guard`, `answerApprovals`,
 *   `usableTools`; `derivedKey`, the default idempotency key of a call (`keys.ts`);
 * - `ToolgateClient`: the gateway endpoints under the retry rules (`retry.ts`);
 * - the errors (`errors.ts`), all `AISDKError`s with `isInstance`.
 */
export { type ClientOptions, type DecideRequest, type TokenSource, ToolgateClient } from './client.js';
export {
  ToolgateApiError,
  ToolgateApprovalRequiredError,
  ToolgateDeniedError,
  ToolgateError,
  ToolgateNetworkError,
  ToolgateReplayedFailureError,
  ToolgateReportError,
  ToolgateUnexpectedResponseError,
} from './errors.js';
export { executableInput, REDACTED } from './inputs.js';
export { derivedKey } from './keys.js';
export { DEFAULT_RETRY, NEVER_RETRIED, type RetryEvent, type RetryPolicy } from './retry.js';
export {
  type AnsweredApproval,
  type ApprovalLink,
  type ApprovalLinks,
  createToolgate,
  type GatewayCall,
  RetryableToolError,
  Toolgate,
  type ToolgateOptions,
} from './toolgate.js';
export type { ApprovalResult, Decision, ExecutionReport, IdempotencyInfo } from './wire.js';
