/**
 * The adapter's client and guard against a live gateway (see `support.ts`): errors in the AI
 * SDK's conventions, the retry rules, outcome reports, and the quick-start example.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { AISDKError, tool } from 'ai';
import { z } from 'zod';

import {
  createToolgate,
  derivedKey,
  executableInput,
  type RetryEvent,
  RetryableToolError,
  ToolgateApiError,
  ToolgateClient,
  ToolgateError,
  ToolgateNetworkError,
  ToolgateReplayedFailureError,
} from '@toolgate/ai-sdk';
import { auditRecords, callId, closedPort, eventsOf, type LiveGateway, startGateway } from './support.js';

let gateway: LiveGateway;
before(async () => {
  gateway = await startGateway();
});
after(async () => {
  await gateway.stop();
});

const client = (token: string, retry = {}) => new ToolgateClient({ baseUrl: gateway.url, token, retry });

describe('errors follow the AI SDK conventions', () => {
  test('a validation error is an AISDKError with code, request id and one attempt', async () => {
    const error = await client(gateway.tokens.agent).decide({ tool: 'readFile', input: { path: '/srv/a', mode: 'rw' } })
      .then(() => undefined, (e: unknown) => e);
    assert.ok(AISDKError.isInstance(error) && ToolgateError.isInstance(error) && ToolgateApiError.isInstance(error));
    assert.equal(error.name, 'AI_ToolgateApiError');
    assert.deepEqual([error.code, error.statusCode, error.isRetryable, error.attempts], ['VALIDATION_ERROR', 422, false, 1]);
    assert.match(error.requestId ?? '', /^tga-[0-9a-f]{24}$/);
    assert.deepEqual(error.details, { problems: [{ path: '/mode', message: 'Extra inputs are not permitted' }] });
  });

  test('a bad token is UNAUTHENTICATED, sent once', async () => {
    const error = await client('not-a-token').decide({ tool: 'readFile', input: { path: '/srv/a' } }).catch(e => e);
    assert.ok(ToolgateApiError.isInstance(error));
    assert.deepEqual([error.code, error.statusCode, error.attempts], ['UNAUTHENTICATED', 401, 1]);
  });
});

describe('retry rules', () => {
  test('a 409 in flight whose Retry-After ends past the deadline is not retried', async () => {
    const key = `del-${randomUUID()}`;
    const admin = client(gateway.tokens.admin, { deadlineMs: 3000 });
    const reserved = await admin.decide({ tool: 'deleteFile', input: { path: '/srv/tmp/x' }, idempotencyKey: key });
    assert.equal(reserved.idempotency?.state, 'reserved');
    const started = performance.now();
    const error = await admin.decide({ tool: 'deleteFile', input: { path: '/srv/tmp/x' }, idempotencyKey: key }).catch(e => e);
    assert.ok(ToolgateApiError.isInstance(error));
    assert.deepEqual([error.code, error.statusCode, error.isRetryable, error.attempts], ['CONFLICT', 409, true, 1]);
    assert.ok((error.retryAfterSeconds ?? 0) >= 50, `Retry-After ${error.retryAfterSeconds}`);
    assert.ok(performance.now() - started < 500, 'gave up at once instead of sleeping into the deadline');
  });

  test('connection refused is retried with full-jitter backoff up to the cap', async () => {
    const events: RetryEvent[] = [];
    const policy = { maxAttempts: 3, deadlineMs: 3000, baseDelayMs: 40, maxDelayMs: 200 };
    const down = new ToolgateClient({ baseUrl: `http://127.0.0.1:${await closedPort()}`, token: 't', retry: policy, onRetry: e => events.push(e) });
    const error = await down.answerApproval('ap_' + 'x'.repeat(32), true).catch(e => e);
    assert.ok(ToolgateNetworkError.isInstance(error));
    assert.equal(error.sent, false);
    assert.equal(error.attempts, 3);
    assert.deepEqual(events.map(e => e.attempt), [1, 2]);
    events.forEach((e, n) => assert.ok(e.delayMs >= 0 && e.delayMs <= Math.min(200, 40 * 2 ** n)));
  });
});

describe('guarded execute reports outcomes', () => {
  const options = (id: string) => ({ toolCallId: id, messages: [], context: {} });

  test('a retryable failure releases the key; the retry runs; then it replays', async () => {
    let runs = 0;
    const toolgate = createToolgate({ baseUrl: gateway.url, token: gateway.tokens.admin });
    const deleteFile = toolgate.guard('deleteFile', tool({
      inputSchema: z.object({ path: z.string() }),
      execute: async ({ path }) => {
        runs += 1;
        if (runs === 1) throw new RetryableToolError('file server busy');
        return { deleted: path };
      },
    }));
    const id = callId('del');
    const path = `/srv/tmp/${id}`;
    await assert.rejects(Promise.resolve(deleteFile.execute!({ path }, options(id))), RetryableToolError);
    assert.deepEqual(await deleteFile.execute!({ path }, options(id)), { deleted: path });
    assert.deepEqual(await deleteFile.execute!({ path }, options(callId('del'))), { deleted: path });  // a regenerated id
    assert.equal(runs, 2);
    assert.deepEqual(eventsOf(await auditRecords(gateway, derivedKey('deleteFile', '1', { path }, []))), [
      'decide:false', 'execution_fail:false', 'decide:false', 'execution_complete:false', 'decide:true',
    ]);
  });

  test('a final failure and a result outside the output schema are replayed as failures', async () => {
    let runs = 0;
    const toolgate = createToolgate({ baseUrl: gateway.url, token: gateway.tokens.agent });
    const createTicket = toolgate.guard('createTicket', tool({
      inputSchema: z.object({ title: z.string(), description: z.string(), priority: z.string(), clientMutationId: z.string() }),
      execute: async ({ title }) => {
        runs += 1;
        return { id: 'T-1', title, status: 'lost', priority: 'high' };
      },
    }));
    const id = callId('ticket');
    const input = { title: 'Printer jammed', description: 'Floor 3.', priority: 'high', clientMutationId: randomUUID() };
    const rejected = await Promise.resolve(createTicket.execute!(input, options(id))).catch(e => e);
    assert.ok(ToolgateApiError.isInstance(rejected) && rejected.code === 'VALIDATION_ERROR');
    const replayed = await Promise.resolve(createTicket.execute!(input, options(id))).catch(e => e);
    assert.ok(ToolgateReplayedFailureError.isInstance(replayed));
    assert.equal(replayed.failureReason, "the tool's result does not match the contract's output schema");
    assert.equal(runs, 1);
  });
});

describe('executableInput', () => {
  test('redacted members come back from the sent arguments, the gateway wins elsewhere', () => {
    const sent = { to: 'bob@acme.example', body: 'the secret plan', amount: 1500, cc: [{ note: 'n1' }] };
    const decided = { to: 'bob@acme.example', body: '[REDACTED]', amount: 1200, cc: [{ note: '[REDACTED]' }], subject: '' };
    assert.deepEqual(executableInput(decided, sent), { to: 'bob@acme.example', body: 'the secret plan', amount: 1200, cc: [{ note: 'n1' }], subject: '' });
    assert.deepEqual(executableInput({ token: '[REDACTED]' }, {}), { token: '[REDACTED]' });
  });
});

describe('capabilities', () => {
  test('usableTools keeps the tools the caller may use at all', async () => {
    const noop = (schema: z.ZodTypeAny) => tool({ inputSchema: schema, execute: async () => 'ok' });
    const tools = {
      readFile: noop(z.object({ path: z.string() })),
      processPayment: noop(z.object({ amount: z.number() })),
      deleteFile: noop(z.object({ path: z.string() })),
    };
    const agent = await createToolgate({ baseUrl: gateway.url, token: gateway.tokens.agent }).usableTools(tools);
    assert.deepEqual(Object.keys(agent), ['readFile']);
    const admin = await createToolgate({ baseUrl: gateway.url, token: gateway.tokens.admin }).usableTools(tools);
    assert.deepEqual(Object.keys(admin).sort(), ['deleteFile', 'processPayment', 'readFile']);
    const other = await createToolgate({ baseUrl: gateway.url, token: gateway.tokens.admin, versions: { readFile: '9' } })
      .usableTools(tools);
    assert.ok(!('readFile' in other));
  });
});

describe('quick-start example', () => {
  test('examples/payment-agent.js pays once after the approval', async () => {
    const script = fileURLToPath(new URL('../examples/payment-agent.js', import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, [script], {
      env: {
        ...process.env, TOOLGATE_URL: gateway.url, TOOLGATE_TOKEN: gateway.tokens.admin,
        TOOLGATE_APPROVER_TOKEN: gateway.tokens.approver,
      },
    });
    assert.deepEqual(stdout.trim().split('\n'), [
      'approval requested: payment over 1000 needs approval',
      'gateway approval: approved',
      'tool result: {"payment":"pm-1","amount":1500,"currency":"EUR","recipient":"acct_42"}',
      'model: Paid 1500 EUR to acct_42.',
      'payments made: 1',
    ]);
  });
});
