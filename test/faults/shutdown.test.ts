import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, print } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { SERVER_STOPPED } from '../../src/domain/tasks/runner.ts';
import type { TestApp } from '../helpers/app.ts';
import { freshDatabase } from '../helpers/database.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../helpers/fake-openai.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { ledgerMismatches } from '../helpers/ledger.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { apiClient } from '../helpers/api-client.ts';
import { freshDatabaseEnv, runCli, startServerProcess, type ServerProcess } from '../helpers/process.ts';
import { openRawSocket } from '../helpers/raw-socket.ts';
import { viewerOf } from '../helpers/rest-helpers.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, updates } from '../helpers/sse.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';

const SUBSCRIPTION = parse(`subscription Watch($id: ID!, $after: Seq) {
  sessionEvents(sessionId: $id, after: $after) {
    type seq
    ... on AssistantMessage { message { id status content } }
    ... on ReplyFailed { error message { id status content } }
  }
}`);

/**
 * SIGTERM to a real server process while it is busy: a reply about to finish, one that will not
 * finish within the grace period, a watcher over SSE, a subscription over graphql-ws and a REST
 * request whose body is still arriving. Replies are held and released by the test (a fake model
 * that waits on it), so what finishes within the grace period never depends on timing.
 */
describe('SIGTERM', () => {
  let db: Awaited<ReturnType<typeof freshDatabaseEnv>>;
  let llm: FakeOpenAI;
  let env: Record<string, string>;
  let server: ServerProcess;
  let apiKey: string;
  let agentId: string;
  let slowId: string;
  let sessionId: string;
  const ws = graphqlWsClients(() => server.url);

  let alice: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    db = await freshDatabaseEnv();
    llm = await startFakeOpenAI({ tokens: ['Hi', ' there'] });
    env = { ...db.env, LLM_BASE_URL: llm.baseUrl, SHUTDOWN_GRACE_MS: '3000' };
    const key = await runCli(['keys', 'create', 'alice', '--json'], env);
    expect(key.code, key.stderr).toBe(0);
    apiKey = JSON.parse(key.stdout).apiKey;
    alice = apiClient(() => server.url, apiKey);
    server = await startServerProcess(env);
    await server.waitFor(/listening on/);
    const created = await alice.graphql('mutation { createAgent(input: {name: "Calm", key: "calm"}) { rawId } }');
    agentId = created.body.data.createAgent.rawId;
    const slow = await alice.graphql('mutation { createAgent(input: {name: "Slow", key: "slow"}) { rawId } }');
    slowId = slow.body.data.createAgent.rawId;
    const first = await alice.rest('POST', '/v2/sessions', { agent_ids: [agentId, slowId], content: 'hello' });
    sessionId = first.body.session_id;
    // Its reply done, so that the watchers opened next see only what the test does.
    for (;;) {
      const read = await alice.rest('GET', `/v2/sessions/${sessionId}`);
      if (read.body.messages.every((m: { status: string }) => m.status !== 'streaming')) break;
      await new Promise((r) => setTimeout(r, 50));
    }
  });
  afterAll(async () => {
    await ws.disposeAll();
    server?.child.kill('SIGKILL');
    await llm?.close();
    await db?.drop();
  });

  it('lets in-flight requests and replies finish within the grace period, ends every stream with SHUTTING_DOWN, and exits 0', async () => {
    // A watcher of the whole session over SSE (and, below, over graphql-ws and GraphQL over SSE).
    const watcher = await openSse(`${server.url}/v2/sessions/${sessionId}/events`, { headers: { 'x-api-key': apiKey } });

    // Two replies to one prompt, by the session's two agents, held mid-stream: one the test lets
    // finish during the grace period, one never. (One prompt, since a session answers its prompts
    // one at a time: a second prompt would wait for the first's replies.)
    let release!: () => void;
    const finishing = new Promise<void>((resolve) => (release = resolve));
    llm.choose((r) => {
      if (r.body.messages.at(-1)?.content !== 'both of you, please') return undefined;
      const system = String(r.body.messages[0]?.content);
      if (system.includes('(@calm)')) return { tokens: ['Done', ' in', ' time'], gate: (i) => (i === 2 ? finishing : undefined) };
      if (system.includes('(@slow)'))
        return { tokens: ['Too', ' slow', ' for', ' this'], gate: (i) => (i === 2 ? new Promise<void>(() => {}) : undefined) };
      return undefined;
    });
    const both = await alice.stream({ session_id: sessionId, content: 'both of you, please', agent_ids: [agentId, slowId] });
    const token = (text: string) => (f: { data: { data?: { type?: string; text?: string } } }) =>
      f.data.data?.type === 'assistant_token' && f.data.data.text === text;
    await watcher.waitFor(token(' in'));
    await watcher.waitFor(token(' slow'));
    // Over graphql-ws from the first prompt's start (replayed: the socket may connect after it).
    const started = await watcher.waitFor((f) => f.data.data?.type === 'start_prompt');
    const subscription = wsSubscribe(ws.connect(apiKey), SUBSCRIPTION, { id: sessionId, after: started.id! - 1 });
    await subscription.waitFor((r) => (r.data as { sessionEvents?: { type: string } } | null)?.sessionEvents?.type === 'assistant_token');
    // And over GraphQL's own SSE transport.
    const overSse = await openSse(`${server.url}/graphql`, {
      method: 'POST',
      headers: { 'x-api-key': apiKey, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: print(SUBSCRIPTION), variables: { id: sessionId, after: started.id! - 1 } }),
    });
    await overSse.waitFor((f) => f.data.data?.sessionEvents?.type === 'assistant_token');

    // A REST request whose body is still arriving when the signal comes.
    const body = JSON.stringify({ agent_ids: [agentId], title: 'Started before the signal' });
    const slow = await openRawSocket(server.url);
    const sentAt = server.output().length;
    slow.socket.write(
      `POST /v2/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${apiKey}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 10)}`,
    );
    await server.waitFor(/"url":"\/v2\/sessions".*"msg":"incoming request"/, { since: sentAt });

    server.child.kill('SIGTERM');
    await server.waitFor(/SIGTERM received/);
    // New requests are turned away while the service drains.
    expect((await fetch(`${server.url}/healthz`)).status).toBe(503);
    slow.socket.write(body.slice(10));
    release();

    const answer = await slow.closed;
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual({ session_id: expect.any(String), message_id: null });

    // The reply released in time completes; the other is cut off when the grace period ends.
    const stopped = updates(await both.done);
    expect(stopped.find((e) => e.type === 'assistant_message').message).toMatchObject({ status: 'complete', content: 'Done in time' });
    const failure = stopped.find((e) => e.type === 'error');
    expect(failure).toMatchObject({ error: 'The server shut down before the reply was finished' });
    expect(failure.message).toMatchObject({ status: 'failed', content: 'Too slow' });
    expect(stopped.at(-1).type).toBe('end_prompt');

    // The session's watchers: everything, then a last frame telling them to reconnect.
    const frames = await watcher.done;
    const end = frames.at(-2)!;
    expect(end.data).toEqual({
      event: 'error',
      data: {
        error: expect.stringContaining('shutting down'),
        code: 'SHUTTING_DOWN',
        last_event_id: frames.filter((f) => f.id !== undefined).at(-1)!.id,
      },
    });
    expect(frames.at(-1)!.data).toEqual({ event: 'done', data: '' });
    expect(
      updates(frames)
        .filter((e) => e.type === 'assistant_message' || e.type === 'error')
        .map((e) => e.message.status),
    ).toEqual(['complete', 'failed']);

    const results = await subscription.ended;
    const last = results.at(-1)!;
    expect(last.errors).toEqual([
      expect.objectContaining({
        message: expect.stringContaining('shutting down'),
        extensions: expect.objectContaining({ code: 'SHUTTING_DOWN', lastSeq: expect.any(Number) }),
      }),
    ]);
    type Watched = { sessionEvents?: { type: string; message?: { status: string } } } | null | undefined;
    const replies = results.map((r) => (r.data as Watched)?.sessionEvents).filter((e) => e?.message);
    expect(replies.map((e) => [e!.type, e!.message!.status])).toEqual([
      ['assistant_message', 'COMPLETE'],
      ['error', 'FAILED'],
    ]);

    const sseResults = (await overSse.done).map((f) => f.data);
    expect(sseResults.at(-1).errors).toEqual([
      expect.objectContaining({ extensions: expect.objectContaining({ code: 'SHUTTING_DOWN', lastSeq: expect.any(Number) }) }),
    ]);

    expect(await server.exited).toBe(0);
  });
});

/** The app closed in process (as on SIGTERM) while a task it started is still running. */
describe('closing the service with a task running', () => {
  // Started before the test, as every app is: under load a start-up alone can take most of a test's time.
  let tools: Awaited<ReturnType<typeof startFakeToolService>>;
  let database: DatabaseConfig;
  let t: TestApp;
  setUp(async (start) => {
    tools = await start.service(startFakeToolService({ hang: true }));
    const fresh = await start.service(freshDatabase(), (f) => f.drop());
    database =
      fresh.config.kind === 'postgres' ? fresh.config : { kind: 'pglite', dataDir: await mkdtemp(join(tmpdir(), 'parley-tasks-')) };
    const toolsDir = await toolRegistryWith({ slow: httpTool('slow', tools.url) });
    t = await start.app({ toolsDir, shutdownGraceMs: 200 }, database);
  });

  it('lets it run for the grace period, then settles it as failed with its hold given back', async () => {
    const user = await t.createUser('closer');
    await t.services.manna.grant(user.username, '3', 'forever');
    const task = await t.services.tasks.create(await viewerOf(t, user), { tool: 'slow', args: { prompt: 'x' } });
    while (tools.calls.length === 0) await new Promise((r) => setTimeout(r, 10));
    await t.close();
    await tools.calls[0]!.abandoned;
    const reopened = await openDatabase(database);
    try {
      expect(await reopened.prisma.task.findUniqueOrThrow({ where: { id: task.id } })).toMatchObject({
        status: 'failed',
        error: SERVER_STOPPED,
      });
      expect((await reopened.prisma.user.findUniqueOrThrow({ where: { id: user.id } })).foreverBalance.toNumber()).toBe(3);
      expect(await ledgerMismatches(reopened.prisma)).toEqual([]);
    } finally {
      await reopened.close();
    }
  });
});
