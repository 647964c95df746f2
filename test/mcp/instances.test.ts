import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { startNginx } from '../helpers/nginx.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { startRedis } from '../helpers/redis.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * `/mcp` on two instances over one PostgreSQL and one Redis. An MCP session lives in the memory
 * of the instance that opened it: its id named on the other instance is 404 with a JSON-RPC
 * error body, as the specification says, and the SDK's client then opens a new session there.
 * Behind nginx configured as `docs/mcp.md` says (a consistent hash on the client's key), every
 * request of a session reaches the instance that holds it.
 */
let a: TestApp;
let b: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;
let agentId: string;
let nginx: Awaited<ReturnType<typeof startNginx>>;
let bySessionId: Awaited<ReturnType<typeof startNginx>>;
const opened: Client[] = [];

setUp(async (start) => {
  const [redis, database] = await Promise.all([start.service(startRedis()), start.service(freshPostgresDatabase(), (d) => d.drop())]);
  llm = await start.fakeOpenAI({ tokens: ['Lights', ' on'] });
  const config = { redisUrl: redis.url, llm: { baseUrl: llm.baseUrl } };
  // One after the other: the first applies the migrations.
  a = await start.app(config, { kind: 'postgres', url: database.url });
  b = await start.app(config, { kind: 'postgres', url: database.url });
  alice = await a.createUser('alice');
  agentId = (await fixtures(a).agent(alice, { name: 'Keeper', key: 'keeper' })).id;
  // The operators' configuration of docs/mcp.md: one instance per key, whatever the request.
  nginx = await start.service(
    startNginx({ servers: [a.url, b.url].map((url) => new URL(url).host), hash: '"$http_x_api_key$http_authorization"' }),
  );
  // What docs/mcp.md warns against: the id is chosen by the instance after nginx chose it.
  bySessionId = await start.service(startNginx({ servers: [a.url, b.url].map((url) => new URL(url).host), hash: '$http_mcp_session_id' }));
});
beforeEach(() => llm.reset());
afterEach(async () => {
  for (const client of opened.splice(0)) await client.close().catch(() => {});
});

type Fetch = typeof fetch;
const textOf = (result: CallToolResult) => result.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

/**
 * An MCP client as an application keeps one with the SDK: when a request is answered 404 (its
 * session unknown where the request went) it opens a new session and asks again, as the
 * specification tells clients to. Any other failure is thrown.
 */
function mcpClient(key: string, fetchVia: Fetch, base: string) {
  let client: Client | null = null;
  let transport: StreamableHTTPClientTransport | null = null;
  let sessionsOpened = 0;
  const open = async () => {
    transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
      requestInit: { headers: { 'x-api-key': key } },
      fetch: fetchVia,
    });
    client = new Client({ name: 'instances-test', version: '1.0.0' });
    opened.push(client);
    await client.connect(transport);
    sessionsOpened++;
  };
  return {
    sessionId: () => transport?.sessionId,
    sessionsOpened: () => sessionsOpened,
    async call(name: string, args: Record<string, unknown>, onprogress?: (p: { message?: string }) => void) {
      if (!client) await open();
      const ask = () =>
        client!.callTool({ name, arguments: args }, undefined, onprogress ? { onprogress } : undefined) as Promise<CallToolResult>;
      try {
        return await ask();
      } catch (e) {
        if (!(e instanceof StreamableHTTPError && e.code === 404)) throw e;
        await client!.close();
        await open();
        return ask();
      }
    },
    async end() {
      await transport?.terminateSession();
      await client?.close();
    },
  };
}

/** A request of our own on a session, as any HTTP client would send it. */
const onSession = (app: TestApp, sessionId: string, method: 'POST' | 'GET' | 'DELETE') =>
  fetch(`${app.url}/mcp`, {
    method,
    headers: {
      'x-api-key': alice.apiKey,
      'mcp-session-id': sessionId,
      'mcp-protocol-version': '2025-06-18',
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: method === 'POST' ? JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' }) : undefined,
  });

describe('/mcp on several instances', () => {
  it("a session opened on a is unknown to b: 404 with a JSON-RPC error body, for a POST, a GET and a DELETE; a's session goes on", async () => {
    const client = mcpClient(alice.apiKey, fetch, a.url);
    expect(textOf(await client.call('list_agents', {}))).toContain('Keeper');
    const sessionId = client.sessionId()!;
    for (const method of ['POST', 'GET', 'DELETE'] as const) {
      const res = await onSession(b, sessionId, method);
      expect(res.status).toBe(404);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await res.json()).toEqual({ jsonrpc: '2.0', error: { code: -32000, message: 'Session not found' }, id: null });
    }
    // b's refusals changed nothing on a: the session answers there still.
    const onA = await onSession(a, sessionId, 'POST');
    expect(onA.status).toBe(200);
    expect(await onA.text()).toContain('talk_to_agent');
    expect(textOf(await client.call('list_agents', {}))).toContain('Keeper');
    expect(client.sessionsOpened()).toBe(1);
    await client.end();
  });

  it("the SDK's client sent to b mid-session (a balancer that moved it) gets 404, opens a new session on b and completes its calls", async () => {
    let target = a.url;
    const balancer: Fetch = (url, init) => fetch(`${target}${new URL(String(url)).pathname}`, init);
    const client = mcpClient(alice.apiKey, balancer, a.url);
    expect(textOf(await client.call('list_agents', {}))).toContain('Keeper');
    const first = client.sessionId()!;

    target = b.url;
    const told: string[] = [];
    const result = await client.call('talk_to_agent', { agent_id: agentId, content: 'Are the lamps lit?' }, (p) =>
      told.push(p.message ?? ''),
    );
    expect(result.isError).toBeFalsy();
    expect(textOf(result)).toBe('Lights on');
    expect(told).toEqual(['Lights', ' on']);
    expect(client.sessionsOpened()).toBe(2);
    const second = client.sessionId()!;
    expect(second).not.toBe(first);
    // The new session is b's, and a's is still a's.
    expect((await onSession(b, second, 'POST')).status).toBe(200);
    expect((await onSession(a, second, 'POST')).status).toBe(404);
    expect((await onSession(a, first, 'POST')).status).toBe(200);
    expect(textOf(await client.call('list_agents', {}))).toContain('Keeper');
    expect(client.sessionsOpened()).toBe(2);
    await client.end();
  });

  it('behind nginx hashing on the key, each of 16 clients completes several calls in one session on one instance; both instances serve', async () => {
    const keys = [alice.apiKey];
    for (let i = 1; i < 16; i++) keys.push((await a.createUser(`user${i}`)).apiKey);
    const runs = await Promise.all(
      keys.map(async (key, i) => {
        const upstreams: string[] = [];
        const recording: Fetch = async (url, init) => {
          const response = await fetch(url, init);
          upstreams.push(response.headers.get('x-upstream') ?? 'none');
          return response;
        };
        const client = mcpClient(key, recording, nginx.url);
        const listed = textOf(await client.call('list_agents', {}));
        const talked = await client.call('talk_to_agent', { agent_id: agentId, content: `Lamp ${i}?` });
        const again = textOf(await client.call('list_agents', { first: 5 }));
        await client.end();
        return { listed, talked: textOf(talked), again, upstreams, sessions: client.sessionsOpened() };
      }),
    );
    for (const run of runs) {
      expect(run.listed).toContain('Keeper');
      expect(run.again).toContain('Keeper');
      expect(run.talked).toBe('Lights on');
      // One session from start to end: no request of it met an instance that did not hold it.
      expect(run.sessions).toBe(1);
      expect(new Set(run.upstreams).size).toBe(1);
    }
    const instances = new Set([a.url, b.url].map((url) => new URL(url).host));
    expect(new Set(runs.map((run) => run.upstreams[0]))).toEqual(instances);
    expect(await nginx.errors()).toBe('');
  });

  it('hashing on Mcp-Session-Id alone is not enough: the instance that chose the id is not the one its hash names', async () => {
    // Sessions opened through that nginx (an initialize has no id: round robin), then one call each, as is.
    const outcomes = await Promise.all(
      Array.from({ length: 16 }, async () => {
        const client = new Client({ name: 'instances-test', version: '1.0.0' });
        opened.push(client);
        const transport = new StreamableHTTPClientTransport(new URL(`${bySessionId.url}/mcp`), {
          requestInit: { headers: { 'x-api-key': alice.apiKey } },
        });
        try {
          // The client's first request with its id (the `initialized` notification) may already meet the wrong one.
          await client.connect(transport);
          await client.callTool({ name: 'list_agents', arguments: {} });
          return 'answered';
        } catch (e) {
          return e instanceof StreamableHTTPError ? e.code : String(e);
        }
      }),
    );
    // About half meet the other instance; all 16 finding theirs by chance is one in 65,536.
    expect(outcomes).toContain(404);
    expect(new Set(outcomes)).toEqual(new Set(['answered', 404]));
  });

  it("through nginx, a call's progress reaches the client as it is written (the model sends each token once the last arrived)", async () => {
    const tokens = ['One', ' lamp', ' after', ' another', '.'];
    const arrived = tokens.map(() => {
      let resolve!: () => void;
      return { promise: new Promise<void>((r) => (resolve = r)), resolve: () => resolve() };
    });
    llm.enqueue({ tokens, gate: (i) => (i === 0 ? undefined : arrived[i - 1]!.promise) });
    const told: string[] = [];
    const client = mcpClient(alice.apiKey, fetch, nginx.url);
    const result = await client.call('talk_to_agent', { agent_id: agentId, content: 'Slowly, please' }, (p) => {
      told.push(p.message ?? '');
      arrived[told.length - 1]?.resolve();
    });
    expect(told).toEqual(tokens);
    expect(textOf(result)).toBe(tokens.join(''));
    await client.end();
  });
});
