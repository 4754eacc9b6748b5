/**
 * The one retry behaviour of the adapter (the same rules as the Python client):
 *
 * - retried: an error body with `retryable: true` (409 in flight, 429, 503) and a network
 *   error (no response); a call that is not idempotent only when the request was never sent;
 * - never retried: VALIDATION_ERROR, UNAUTHENTICATED, FORBIDDEN (whatever the body says), a
 *   CONFLICT with `retryable: false`, a response without the gateway's error body;
 * - backoff: full jitter, `random(0, min(maxDelayMs, baseDelayMs * 2^n))` before retry n (from 0);
 *   `Retry-After` is a floor, never undercut;
 * - at most `maxAttempts` inside one `deadlineMs`; a retry is started only if its wait plus the
 *   time an attempt needs (the last attempt's duration, at least `minAttemptMs`) ends before
 *   the deadline; each attempt is aborted when the time left (or `attemptTimeoutMs`) runs out.
 *
 * Callers keep one `Idempotency-Key` for every attempt of a logical call.
 */
import { ToolgateApiError, ToolgateError, ToolgateNetworkError } from './errors.js';

export interface RetryPolicy {
  maxAttempts: number;
  deadlineMs: number;
  baseDelayMs: number;
  maxDelayMs: number;
  attemptTimeoutMs: number;
  minAttemptMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  maxAttempts: 4,
  deadlineMs: 10_000,
  baseDelayMs: 200,
  maxDelayMs: 5_000,
  attemptTimeoutMs: 5_000,
  minAttemptMs: 50,
};

/** Codes never retried, even if a body claimed `retryable: true`. */
export const NEVER_RETRIED = new Set(['VALIDATION_ERROR', 'UNAUTHENTICATED', 'FORBIDDEN']);

/** Told before each wait: the failed `attempt` (from 1), its error and the wait. */
export interface RetryEvent {
  attempt: number;
  error: ToolgateError;
  delayMs: number;
  elapsedMs: number;
}

export function isRetryable(error: unknown, idempotent: boolean): boolean {
  if (ToolgateNetworkError.isInstance(error)) return idempotent || !error.sent;
  if (ToolgateApiError.isInstance(error)) return error.isRetryable && !NEVER_RETRIED.has(error.code);
  return false;
}

export function backoffMs(policy: RetryPolicy, retryIndex: number, random: () => number = Math.random): number {
  return random() * Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** retryIndex);
}

function sleep(ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms));
}

/**
 * Runs `attempt(number, signal)` until it resolves; rethrows its last `ToolgateError` with
 * `attempts` set. `signal` aborts when the attempt's time is up. Other errors propagate at once.
 */
export async function runWithRetries<T>(
  attempt: (number: number, signal: AbortSignal) => Promise<T>,
  policy: RetryPolicy,
  { idempotent, onRetry }: { idempotent: boolean; onRetry?: (event: RetryEvent) => void },
): Promise<T> {
  const started = performance.now();
  const leftMs = () => Math.max(0, started + policy.deadlineMs - performance.now());
  for (let number = 1; ; number++) {
    const attemptStarted = performance.now();
    const timeoutMs = Math.max(policy.minAttemptMs, Math.min(policy.attemptTimeoutMs, leftMs()));
    try {
      return await attempt(number, AbortSignal.timeout(Math.ceil(timeoutMs)));
    } catch (error) {
      if (!ToolgateError.isInstance(error)) throw error;
      error.attempts = number;
      const tookMs = performance.now() - attemptStarted;
      if (number >= policy.maxAttempts || !isRetryable(error, idempotent)) throw error;
      let delayMs = backoffMs(policy, number - 1);
      if (ToolgateApiError.isInstance(error) && error.retryAfterSeconds !== undefined) {
        delayMs = Math.max(delayMs, error.retryAfterSeconds * 1000);
      }
      if (delayMs + Math.max(tookMs, policy.minAttemptMs) > leftMs()) throw error;
      onRetry?.({ attempt: number, error, delayMs, elapsedMs: performance.now() - started });
      await sleep(delayMs);
    }
  }
}
