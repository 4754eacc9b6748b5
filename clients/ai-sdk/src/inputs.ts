/**
 * The input a tool runs with: the gateway's answer, with its redacted members taken back from the
 * arguments the model sent. A decide response's `input` is the contract's normalized input
 * (trimmed strings, defaults, an approver's edit) with the members the contract marks sensitive
 * replaced by `"[REDACTED]"`: the gateway never echoes them, and an approver can never change
 * them, so the call's own value is the one to run with.
 */
export const REDACTED = '[REDACTED]';

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function merge(decided: unknown, sent: unknown): unknown {
  if (decided === REDACTED) return sent;
  if (isObject(decided) && isObject(sent)) {
    return Object.fromEntries(Object.entries(decided).map(([key, value]) => [key, key in sent ? merge(value, sent[key]) : value]));
  }
  if (Array.isArray(decided) && Array.isArray(sent) && decided.length === sent.length) {
    return decided.map((value, index) => merge(value, sent[index]));
  }
  return decided;
}

/** `decided` (the response's `input`) with every `"[REDACTED]"` member replaced by the member at the same place in `sent`. */
export function executableInput(decided: Record<string, unknown>, sent: unknown): Record<string, unknown> {
  return merge(decided, sent) as Record<string, unknown>;
}
