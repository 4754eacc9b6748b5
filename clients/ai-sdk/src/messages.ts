/**
 * Reading the AI SDK's message history (`ModelMessage[]`) for the approval-response turn:
 * which tool calls exist, which approval requests were made for them, and which answers the
 * app added in the last tool message. Mirrors the SDK's own collection rules (only the last
 * message counts; automatic approvals and calls that already have a result are skipped).
 */
import type { ModelMessage } from 'ai';

export interface CallInHistory {
  toolName: string;
  toolCallId: string;
  input: unknown;
}

export interface ApprovalResponseInHistory {
  approvalId: string;
  approved: boolean;
  reason: string | undefined;
  toolCall: CallInHistory;
}

function assistantParts(messages: ModelMessage[]): Array<Record<string, unknown>> {
  const parts: Array<Record<string, unknown>> = [];
  for (const message of messages) {
    if (message.role === 'assistant' && typeof message.content !== 'string') {
      parts.push(...(message.content as unknown as Array<Record<string, unknown>>));
    }
  }
  return parts;
}

/**
 * The answers in the last message (a `tool` message) that the SDK will act on: each with the
 * tool call it answers. Unknown approval ids and automatic approvals are left out.
 */
export function approvalResponses(messages: ModelMessage[]): ApprovalResponseInHistory[] {
  const last = messages.at(-1);
  if (last?.role !== 'tool') return [];
  const calls = new Map<string, CallInHistory>();
  const requests = new Map<string, { toolCallId: string; isAutomatic: boolean }>();
  for (const part of assistantParts(messages)) {
    if (part.type === 'tool-call') {
      const call = { toolName: String(part.toolName), toolCallId: String(part.toolCallId), input: part.input };
      calls.set(call.toolCallId, call);
    } else if (part.type === 'tool-approval-request') {
      requests.set(String(part.approvalId), { toolCallId: String(part.toolCallId), isAutomatic: part.isAutomatic === true });
    }
  }
  const content = last.content as unknown as Array<Record<string, unknown>>;
  const answered = new Set(content.filter(p => p.type === 'tool-result').map(p => String(p.toolCallId)));
  const found: ApprovalResponseInHistory[] = [];
  const seen = new Set<string>();
  for (const part of content) {
    if (part.type !== 'tool-approval-response') continue;
    const request = requests.get(String(part.approvalId));
    const call = request && calls.get(request.toolCallId);
    if (!request || !call || request.isAutomatic || answered.has(call.toolCallId) || seen.has(call.toolCallId)) continue;
    seen.add(call.toolCallId);
    found.push({
      approvalId: String(part.approvalId),
      approved: part.approved === true,
      reason: typeof part.reason === 'string' ? part.reason : undefined,
      toolCall: call,
    });
  }
  return found;
}

/** The approved answer for `toolCallId` in the last message, if any. */
export function approvedResponseFor(messages: ModelMessage[], toolCallId: string): ApprovalResponseInHistory | undefined {
  return approvalResponses(messages).find(r => r.approved && r.toolCall.toolCallId === toolCallId);
}
