/**
 * Test support: a live gateway and a scripted model.
 *
 * `startGateway()` runs `python -m tests.clients.gateway` from the repository (the project's
 * venv Python, or `TOOLGATE_PYTHON`): a real Redis, a loopback JWKS and the gateway under
 * gunicorn with the real embedded OPA engine, the shipped policies and contracts, on free
 * loopback ports. It prints the URL and RS256 tokens for the test identities (agent:
 * support_agent, admin, approver, auditor, holder: account_holder; tenant acme) and stops when its stdin closes.
 *
 * `scriptedModel(steps)` is the `ai` package's own `MockLanguageModelV4` answering each
 * `doGenerate` with the next step: a tool call, a text, or an error to throw (the only part
 * that cannot run here is a real language model).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

import { MockLanguageModelV4 } from 'ai/test';

export const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

export interface LiveGateway {
  url: string;
  tokens: { agent: string; admin: string; approver: string; auditor: string; holder: string };
  stop(): Promise<void>;
}

export async function startGateway(): Promise<LiveGateway> {
  const python = process.env.TOOLGATE_PYTHON ?? `${REPO_ROOT}.venv/bin/python`;
  const child: ChildProcessWithoutNullStreams = spawn(python, ['-m', 'tests.clients.gateway'], {
    cwd: REPO_ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const stderr: string[] = [];
  child.stderr.on('data', chunk => stderr.push(String(chunk)));
  const exited = new Promise<void>(resolve => child.once('exit', () => resolve()));
  const first = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.once('line', line => resolve(line));
    child.once('exit', code => reject(new Error(`gateway helper exited (${code}): ${stderr.join('').slice(-2000)}`)));
  });
  const started = JSON.parse(first) as Omit<LiveGateway, 'stop'>;
  return {
    ...started,
    async stop() {
      child.stdin.end();
      await exited;
    },
  };
}

type GenerateResult = Awaited<ReturnType<MockLanguageModelV4['doGenerate']>>;
export type Step = GenerateResult | Error;

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

export function toolCallStep(toolCallId: string, toolName: string, input: unknown): GenerateResult {
  return {
    content: [{ type: 'tool-call', toolCallId, toolName, input: JSON.stringify(input) }],
    finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
    usage,
    warnings: [],
  };
}

export function textStep(text: string): GenerateResult {
  return { content: [{ type: 'text', text }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
}

/** A `MockLanguageModelV4` that answers with `steps` in order (and fails when they run out). */
export function scriptedModel(steps: Step[]): MockLanguageModelV4 {
  const queue = [...steps];
  return new MockLanguageModelV4({
    doGenerate: async () => {
      const next = queue.shift();
      if (next === undefined) throw new Error('the scripted model has no more steps');
      if (next instanceof Error) throw next;
      return next;
    },
  });
}

/** The decision log records of one idempotency key, oldest first (read as the auditor). */
export async function auditRecords(gateway: LiveGateway, key: string): Promise<Array<Record<string, unknown>>> {
  const response = await fetch(`${gateway.url}/v1/decisions?idempotency_key=${encodeURIComponent(key)}`, {
    headers: { Authorization: `Bearer ${gateway.tokens.auditor}` },
  });
  const body = (await response.json()) as { records: Array<Record<string, unknown>> };
  return body.records.reverse();
}

/** `event:replayed` of each record, e.g. `decide:false`, `execution_complete:false`, `decide:true`. */
export function eventsOf(records: Array<Record<string, unknown>>): string[] {
  return records.map(r => `${r.event}:${r.replayed ?? ''}`);
}

/** A loopback port nothing listens on (it was free a moment ago). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>(resolve => server.close(() => resolve()));
  return port;
}

/** A unique tool call id such as `call-pay-3f2a...`. */
export function callId(prefix: string): string {
  return `call-${prefix}-${randomUUID().slice(0, 12)}`;
}
