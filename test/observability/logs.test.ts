import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { freshDatabaseEnv, runCli, startServerProcess, type ServerProcess } from '../helpers/process.ts';
import { unknownWellFormedKey } from '../helpers/rest-helpers.ts';

/**
 * The service as `npm start` runs it, logging at debug (everything info logs, and more). Keys go
 * in every place a client puts them; none may reach the output, while each request's id does.
 */
let server: ServerProcess;
let drop: () => Promise<void>;
let key: string;
const metricsToken = randomBytes(24).toString('base64url');
/** The part of a key that makes it a credential (`pk_<id>_<secret>`). */
const secretOf = (apiKey: string) => apiKey.slice(20);

beforeAll(async () => {
  const db = await freshDatabaseEnv();
  drop = db.drop;
  const created = await runCli(['keys', 'create', 'logan', '--json'], db.env);
  expect(created.code, created.stderr).toBe(0);
  key = JSON.parse(created.stdout).apiKey;
  server = await startServerProcess({ ...db.env, LOG_LEVEL: 'debug', METRICS_TOKEN: metricsToken });
  await server.waitFor(/parley listening on/);
}, 120_000);

afterAll(async () => {
  server?.child.kill('SIGTERM');
  await server?.exited;
  await drop?.();
});

const get = (path: string, headers: Record<string, string> = {}) => fetch(`${server.url}${path}`, { headers });
const post = (path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

function wsQuery(apiKey: string): Promise<{ data?: unknown; closed?: number }> {
  return new Promise((resolve) => {
    const client = createClient({
      url: `${server.url.replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { 'X-Api-Key': apiKey },
      retryAttempts: 0,
      lazy: true,
    });
    client.subscribe(
      { query: '{ me { username } }' },
      {
        next: (result) => resolve({ data: result.data }),
        error: (e) => resolve({ closed: (e as { code?: number }).code }),
        complete: () => void client.dispose(),
      },
    );
  });
}

describe('logs', () => {
  it('name each request by its id (the caller’s when sane) and echo it, and never show an API key or the metrics token', async () => {
    const traced = await get('/v2/creators/me', { 'x-api-key': key, 'x-request-id': 'ops-trace-0001' });
    expect(traced.status).toBe(200);
    expect(traced.headers.get('x-request-id')).toBe('ops-trace-0001');

    const untraced = await get('/v2/creators/me', { 'x-api-key': key });
    const generated = untraced.headers.get('x-request-id');
    expect(generated).toMatch(/^[0-9a-f-]{36}$/);

    // Not an id to carry into logs: too long, or characters a log reader could trip on.
    for (const insane of ['x'.repeat(129), 'two words', '{"reqId":"forged"}']) {
      const res = await get('/v2/creators/me', { 'x-api-key': key, 'x-request-id': insane });
      expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    }

    const gql = await post('/graphql', JSON.stringify({ query: '{ me { username } }' }), {
      'x-api-key': key,
      'x-request-id': 'ops-trace-0002',
    });
    expect(await gql.json()).toEqual({ data: { me: { username: 'logan' } } });
    expect(await wsQuery(key)).toEqual({ data: { me: { username: 'logan' } } });

    const stranger = unknownWellFormedKey();
    // Nor in a URL, where no client should put one.
    expect((await get(`/v2/creators/me?api_key=${key}`, { 'x-api-key': key })).status).toBe(200);
    const variables = encodeURIComponent(JSON.stringify({ k: stranger }));
    expect(
      (
        await get(`/graphql?query=${encodeURIComponent('query($k: String) { me { username } }')}&variables=${variables}`, {
          'x-api-key': key,
        })
      ).status,
    ).toBe(200);

    // Keys in bodies and variables: an unknown one, one in a body that is not JSON, then the key deleting itself.
    const deleteStranger = await post(
      '/graphql',
      JSON.stringify({ query: 'mutation($k: String!) { deleteApiKey(apiKey: $k) }', variables: { k: stranger } }),
      { 'x-api-key': key },
    );
    expect((await deleteStranger.json()).errors).toHaveLength(1);
    const malformed = await fetch(`${server.url}/apikeys`, {
      method: 'DELETE',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: `{"apiKey": "${key}", `,
    });
    expect(malformed.status).toBe(400);
    const deleted = await fetch(`${server.url}/apikeys`, {
      method: 'DELETE',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ apiKey: key }),
    });
    expect(deleted.status).toBe(200);

    // Refusals name no key either, and carry their id too.
    const refused = await get('/v2/creators/me', { 'x-api-key': key, 'x-request-id': 'ops-trace-0004' });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('x-request-id')).toBe('ops-trace-0004');
    expect((await wsQuery(key)).closed).toBe(4403);
    expect((await post('/graphql', JSON.stringify({ query: '{ me { username } }' }), { 'x-api-key': key })).status).toBe(401);

    expect((await get('/metrics')).status).toBe(401);
    expect((await get('/metrics', { authorization: 'Bearer wrong-token-of-some-length' })).status).toBe(401);
    const metrics = await get('/metrics', { authorization: `Bearer ${metricsToken}`, 'x-request-id': 'ops-trace-0003' });
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toMatch(/parley_http_requests_total\{route="\/v2\/creators\/me",method="GET",status="200"\} 6$/m);

    // The server logs each response as it completes: wait for the last one before reading.
    await server.waitFor(/"reqId":"ops-trace-0003"[^\n]*"msg":"request completed"/);
    const output = server.output();
    for (const id of ['ops-trace-0001', 'ops-trace-0002', 'ops-trace-0004', generated!])
      expect(output).toMatch(new RegExp(`"reqId":"${id}"[^\\n]*"msg":"request completed"`));
    expect(output).not.toContain('forged');
    for (const secret of [secretOf(key), secretOf(stranger), metricsToken]) expect(output).not.toContain(secret);
  });
});
