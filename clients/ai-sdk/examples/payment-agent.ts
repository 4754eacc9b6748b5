/**
 * Quick start: an AI SDK 7 agent whose tool calls go through toolgate, with a person's approval.
 *
 *     TOOLGATE_URL=http://127.0.0.1:8080 TOOLGATE_TOKEN=<requester token> \
 *       TOOLGATE_APPROVER_TOKEN=<approver token> node dist/examples/payment-agent.js
 *
 * When run like this, the model is the SDK's mock model scripted to ask for one payment of
 * 1500 EUR and then to confirm it: put your provider's model in its place.
 */
import { type LanguageModel, type ModelMessage, tool, ToolLoopAgent, type ToolApprovalResponse } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { z } from 'zod';

import { createToolgate } from '@toolgate/ai-sdk';

export interface PaymentRun {
  model: LanguageModel;
  baseUrl: string;
  /** The requester's (the agent user's) bearer token. */
  token: string;
  /** The bearer token of the person who approves (role `approver`). */
  approverToken: string;
  log: (line: string) => void;
}

export async function payWithApproval({ model, baseUrl, token, approverToken, log }: PaymentRun): Promise<number> {
  let payments = 0;
  const toolgate = createToolgate({ baseUrl, token });
  const agent = new ToolLoopAgent({
    model,
    tools: toolgate.guardTools({
      processPayment: tool({
        description: 'Pay an amount to a recipient.',
        inputSchema: z.object({ amount: z.number(), currency: z.string(), recipient: z.string() }),
        execute: async ({ amount, currency, recipient }) => {
          payments += 1; // your payment system goes here; toolgate makes sure it runs once
          return { payment: `pm-${payments}`, amount, currency, recipient };
        },
      }),
    }),
    toolApproval: toolgate.toolApproval,
  });

  // Turn 1: the policy asks for a person's approval; the tool does not run.
  const messages: ModelMessage[] = [{ role: 'user', content: 'Pay invoice 2291: 1500 EUR to acct_42.' }];
  const first = await agent.generate({ messages });
  messages.push(...first.responseMessages);
  const answers: ToolApprovalResponse[] = [];
  for (const part of first.content) {
    if (part.type === 'tool-approval-request' && !part.isAutomatic) {
      log(`approval requested: ${part.reason}`);
      answers.push({ type: 'tool-approval-response', approvalId: part.approvalId, approved: true, reason: 'invoice checked' });
    }
  }

  // The approver said yes in your UI: record the answer at the gateway with the approver's token.
  messages.push({ role: 'tool', content: answers });
  const answered = await toolgate.answerApprovals(messages, { token: approverToken });
  log(`gateway approval: ${answered.map(a => a.state).join(', ')}`);

  // Turn 2: the grant makes the call allowed once; the tool runs and its result is reported.
  const second = await agent.generate({ messages });
  for (const message of second.responseMessages) {
    for (const part of message.role === 'tool' ? message.content : []) {
      if (part.type === 'tool-result' && part.output.type === 'json') log(`tool result: ${JSON.stringify(part.output.value)}`);
    }
  }
  log(`model: ${second.text}`);
  return payments;
}

function scriptedModel(): LanguageModel {
  const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
  const steps = [
    { content: [{ type: 'tool-call' as const, toolCallId: `call-${Date.now()}`, toolName: 'processPayment',
        input: JSON.stringify({ amount: 1500, currency: 'EUR', recipient: 'acct_42' }) }],
      finishReason: { unified: 'tool-calls' as const, raw: 'tool_calls' }, usage, warnings: [] },
    { content: [{ type: 'text' as const, text: 'Paid 1500 EUR to acct_42.' }],
      finishReason: { unified: 'stop' as const, raw: 'stop' }, usage, warnings: [] },
  ];
  return new MockLanguageModelV4({ doGenerate: steps });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const env = (name: string) => process.env[name] ?? (() => { throw new Error(`set ${name}`); })();
  const payments = await payWithApproval({
    model: scriptedModel(),
    baseUrl: env('TOOLGATE_URL'),
    token: env('TOOLGATE_TOKEN'),
    approverToken: env('TOOLGATE_APPROVER_TOKEN'),
    log: line => console.log(line),
  });
  console.log(`payments made: ${payments}`);
}
