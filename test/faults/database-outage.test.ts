import { parse } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient } from '../helpers/api-client.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../helpers/fake-openai.ts';
import { graphqlWsClients, wsExecute } from '../helpers/graphql-ws.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { runCli, startServerProcess, type ServerProcess } from '../helpers/process.ts';
import { updates } from '../helpers/sse.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';

/**
 * The service on PostgreSQL, reached through a proxy the test cuts and restores: the database
 * goes away under a running process and comes back, with no restart in between.
 */
describe('when the database goes away', () => {
  let database: Awaited<ReturnType<typeof freshPostgresDatabase>>;
  let proxy: TcpProxy;
  let llm: FakeOpenAI;
  let tools: Awaited<ReturnType<typeof startFakeToolService>>;
  let server: ServerProcess;
  let apiKey: string;
  let agentId: string;
  const ws = graphqlWsClients(() => server.url);

  let alice: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    database = await freshPostgresDatabase();
    const target = new URL(database.url);
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
    llm = await startFakeOpenAI({ tokens: ['All', ' good'] });
    tools = await startFakeToolService();
    const toolsDir = await toolRegistryWith({ paid_tool: httpTool('paid_tool', tools.url, 'n') });
    const env = {
      DATABASE_URL: proxy.through(database.url),
      LLM_BASE_URL: llm.baseUrl,
      TOOLS_DIR: toolsDir,
      DATABASE_CONNECT_TIMEOUT_MS: '2000',
    };
    const key = await runCli(['keys', 'create', 'alice', '--json'], env);
    expect(key.code, key.stderr).toBe(0);
    apiKey = JSON.parse(key.stdout).apiKey;
    alice = apiClient(() => server.url, apiKey);
    const grant = await runCli(['manna', 'grant', 'alice', '5'], env);
    expect(grant.code, grant.stderr).toBe(0);
    server = await startServerProcess(env);
    await server.waitFor(/listening on/);
    const created = await alice.graphql(
      'mutation { createAgent(input: {name: "Steady", key: "steady", tools: {paid_tool: true}}) { rawId } }',
    );
    expect(created.body.errors).toBeUndefined();
    agentId = created.body.data.createAgent.rawId;
  });
  afterAll(async () => {
    await ws.disposeAll();
    server?.child.kill('SIGKILL');
    await proxy?.close();
    await llm?.close();
    await tools?.close();
    await database?.drop();
  });

  it('REST answers 503 with Retry-After, GraphQL SERVICE_UNAVAILABLE, /healthz unavailable; all work again when it is back', async () => {
    expect((await alice.rest('GET', '/v2/creators/me')).status).toBe(200);
    const open = ws.connect(apiKey, { lazyCloseTimeout: 60_000 });
    expect((await wsExecute(open, parse('{ me { username } }'))).data).toEqual({ me: { username: 'alice' } });
    await proxy.cut();
    try {
      for (const [method, path, body] of [
        ['GET', '/v2/creators/me', undefined],
        ['POST', '/v2/sessions', { agent_ids: [agentId], content: 'hello?' }],
        ['GET', '/v2/creations/search?query=lighthouse', undefined],
      ] as const) {
        const res = await alice.rest(method, path, body);
        expect(res.status, `${method} ${path}`).toBe(503);
        expect(res.headers.get('retry-after')).toBe('5');
        expect(res.body).toEqual({
          error: 'Service Unavailable',
          message: 'The database is unavailable right now; try again in a few seconds',
        });
      }

      const query = await alice.graphql('{ me { username } }');
      expect(query.status).toBe(503);
      expect(query.headers.get('retry-after')).toBe('5');
      expect(query.body.errors).toEqual([
        expect.objectContaining({
          message: 'The database is unavailable right now; try again in a few seconds',
          extensions: { code: 'SERVICE_UNAVAILABLE', retryAfter: 5 },
        }),
      ]);
      expect(JSON.stringify(query.body)).not.toMatch(/prisma|stack|ECONN|127\.0\.0\.1/i);

      // A socket opened before: its operations answer the same error, and it stays open.
      const overSocket = await wsExecute(open, parse('{ me { username } }'));
      expect(overSocket.errors).toEqual([
        expect.objectContaining({
          message: 'The database is unavailable right now; try again in a few seconds',
          extensions: { code: 'SERVICE_UNAVAILABLE', retryAfter: 5 },
        }),
      ]);

      // A WebSocket cannot be authenticated: it is closed with "try again later" and the reason.
      const closed = await wsExecute(ws.connect(apiKey), parse('{ me { username } }')).then(
        () => null,
        (e: { code?: number; reason?: string }) => e,
      );
      expect(closed).toMatchObject({ code: 1013, reason: 'The database is unavailable right now; try again in a few seconds' });

      const health = await fetch(`${server.url}/healthz`);
      expect(health.status).toBe(503);
      expect(await health.json()).toEqual({ status: 'unavailable', database: 'unreachable' });
    } finally {
      await proxy.restore();
    }

    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    expect((await alice.rest('GET', '/v2/creators/me')).body.creator.username).toBe('alice');
    expect((await alice.graphql('{ me { username } }')).body).toEqual({ data: { me: { username: 'alice' } } });
    expect((await wsExecute(ws.connect(apiKey), parse('{ me { username } }'))).data).toEqual({ me: { username: 'alice' } });
    expect((await wsExecute(open, parse('{ me { username } }'))).data).toEqual({ me: { username: 'alice' } });
    const sent = await alice.rest('POST', '/v2/sessions', { agent_ids: [agentId], content: 'hello again' });
    expect(sent.status).toBe(200);
    expect(server.child.exitCode).toBeNull();
  });

  it('a reply streaming when it goes away ends with an error event and is saved as failed, with its text, once it is back', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const gated = { tokens: ['Half', ' way', ' there'], gate: (i: number) => (i === 2 ? held : undefined) };
    llm.choose((r) => (r.body.messages.at(-1)?.content === 'tell me something' ? gated : undefined));
    const stream = await alice.stream({ agent_ids: [agentId], content: 'tell me something' });
    await stream.waitFor((f) => f.data.data?.type === 'assistant_token' && f.data.data.text === ' way');
    await proxy.cut();
    try {
      release();
      const events = updates(await stream.done);
      const failed = events.find((e) => e.type === 'error');
      expect(failed).toMatchObject({ error: 'The database became unavailable while the reply was being written', agent: agentId });
      expect(failed.message).toMatchObject({ status: 'failed', content: 'Half way there', error: failed.error });
      expect(events.at(-1).type).toBe('end_prompt');
      expect(stream.frames.at(-1)!.event).toBe('done');
      expect(server.child.exitCode).toBeNull();
    } finally {
      await proxy.restore();
    }

    // Saved as its watchers were told, without a restart, once the database answers again.
    const sessionId = updates(stream.frames)[0].session_id;
    await expect
      .poll(async () => (await alice.rest('GET', `/v2/sessions/${sessionId}`)).body.messages?.at(-1), { timeout: 20_000, interval: 250 })
      .toMatchObject({
        status: 'failed',
        content: 'Half way there',
        error: 'The database became unavailable while the reply was being written',
      });

    const again = await alice.rest('POST', '/v2/sessions', { session_id: sessionId, content: 'and now?' });
    expect(again.status).toBe(200);
  });

  it('a tool call whose settling fails while it is away is cancelled and its hold given back once it is back', async () => {
    const balance = async () => (await alice.rest('GET', '/v2/creators/me')).body.balance;
    const before = await balance();
    let answer!: () => void;
    tools.enqueue({ answer: { result: { made: true } }, gate: new Promise<void>((resolve) => (answer = resolve)) });
    llm.choose((r) =>
      r.body.messages.at(-1)?.content === 'make one'
        ? { tokens: ['Making it.'], toolCalls: [{ id: 'call_1', name: 'paid_tool', arguments: '{"prompt":"a kite","n":1}' }] }
        : undefined,
    );
    const stream = await alice.stream({ agent_ids: [agentId], content: 'make one' });
    // The call holds its cost and waits on the tool service; the database goes away; it answers.
    await expect.poll(() => tools.calls.length).toBe(1);
    expect(await balance()).toBe(before - 1);
    await proxy.cut();
    try {
      answer();
      const events = updates(await stream.done);
      expect(events.find((e) => e.type === 'error')).toMatchObject({
        error: 'The database became unavailable while the reply was being written',
        message: { status: 'failed', content: 'Making it.' },
      });
    } finally {
      await proxy.restore();
    }

    const sessionId = updates(stream.frames)[0].session_id;
    await expect
      .poll(async () => (await alice.rest('GET', `/v2/sessions/${sessionId}`)).body.messages?.at(-1), { timeout: 20_000, interval: 250 })
      .toMatchObject({
        status: 'failed',
        tool_calls: [{ tool: 'paid_tool', status: 'cancelled', error: 'The reply ended before the tool call was settled' }],
      });
    expect(await balance()).toBe(before);
  });

  it('a database that stops answering (rather than refusing) makes requests fail within the connect timeout, not hang', async () => {
    proxy.blackhole();
    try {
      const res = await alice.rest('GET', '/v2/creators/me');
      expect(res.status).toBe(503);
      expect(res.body.message).toBe('The database is unavailable right now; try again in a few seconds');
      expect((await fetch(`${server.url}/healthz`)).status).toBe(503);
    } finally {
      await proxy.restore();
    }
    await expect.poll(async () => (await alice.rest('GET', '/v2/creators/me')).status, { timeout: 10_000, interval: 100 }).toBe(200);
  });

  it('survives its idle connections being terminated by the server, and logged no error through any of these outages', async () => {
    const admin = new URL(database.url);
    admin.pathname = '/postgres';
    const name = new URL(database.url).pathname.slice(1);
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: admin.toString() });
    await client.connect();
    try {
      expect((await alice.rest('GET', '/v2/creators/me')).status).toBe(200);
      await client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [name]);
      // Idle connections that were terminated are replaced: nothing crashed, and requests work.
      await expect.poll(async () => (await alice.rest('GET', '/v2/creators/me')).status, { timeout: 10_000, interval: 100 }).toBe(200);
      expect(server.child.exitCode).toBeNull();
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
      // Through every outage of this file, warnings only: nothing was an unexpected error.
      expect(server.output()).not.toMatch(/"level":(50|60)/);
    } finally {
      await client.end();
    }
  });
});
