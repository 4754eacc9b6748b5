/**
 * The identity of a tool call that survives a regenerated step. Providers give every generation
 * new tool call ids, so an id alone cannot tell a retried step from a new call; the default
 * idempotency key is derived from what stays the same instead:
 *
 *     aisdk:<hex SHA-256 of the RFC 8785 JSON {conversation, tool, version, input}>
 *
 * - `conversation`: the messages that led to the step, as a transcript without ids or provider
 *   metadata (`transcript`): per message its role and parts, a text as `{type, text}`, a tool
 *   call as `{type, toolName, input}`, a tool result as `{type, toolName, output}`. These are the
 *   `messages` the SDK hands to `toolApproval` and `execute`; on the approval-response turn,
 *   the messages before the assistant message that holds the call (`conversationBefore`).
 * - `input`: the tool's arguments as the model sent them (RFC 8785: members sorted).
 *
 * The same step proposed again in the same conversation gets the same key (and its stored
 * result); the same call asked for in a later turn does not, since the conversation grew.
 * Two identical calls in one step share a key: the second gets the first one's result.
 */
import { createHash } from 'node:crypto';

import type { ModelMessage } from 'ai';
import canonicalize from 'canonicalize';

type Part = Record<string, unknown>;

function partsOf(message: ModelMessage): Part[] {
  return typeof message.content === 'string'
    ? [{ type: 'text', text: message.content }]
    : (message.content as unknown as Part[]);
}

function transcriptPart(part: Part): Part {
  switch (part.type) {
    case 'text':
    case 'reasoning':
      return { type: part.type, text: part.text };
    case 'tool-call':
      return { type: part.type, toolName: part.toolName, input: part.input };
    case 'tool-result':
      return { type: part.type, toolName: part.toolName, output: part.output };
    default:
      return { type: part.type };
  }
}

/** `messages` without tool call ids, approval ids or provider metadata (see the module doc). */
export function transcript(messages: ModelMessage[]): Part[] {
  return messages.map(message => ({ role: message.role, parts: partsOf(message).map(transcriptPart) }));
}

/** The messages before the assistant message that holds `toolCallId`; all of them when none does. */
export function conversationBefore(messages: ModelMessage[], toolCallId: string): ModelMessage[] {
  const at = messages.findIndex(m => m.role === 'assistant' && partsOf(m).some(p => p.type === 'tool-call' && p.toolCallId === toolCallId));
  return at < 0 ? messages : messages.slice(0, at);
}

/** The default idempotency key of a call (see the module doc). */
export function derivedKey(toolName: string, version: string, input: unknown, conversation: ModelMessage[]): string {
  const text = canonicalize({ conversation: transcript(conversation), tool: toolName, version, input: input ?? null });
  return 'aisdk:' + createHash('sha256').update(text ?? '').digest('hex');
}
