import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { parse } from 'graphql';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { deploymentStore } from '../../src/domain/deployments/store.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { type McpToolServer, startMcpToolServer } from '../helpers/mcp-tool-server.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * MCP servers a user registers, over REST and GraphQL on the real app and database: the
 * authorization header sealed in its row and never shown, a server its owner's alone, the shared
 * guard refusing addresses inside, and the sealing key's upkeep resealing the header with the
 * deployments' secrets and counting it.
 */
const TOKEN = 'Bearer mcp-token-4f2a9c';
/** A public address written as one (TEST-NET-3): nothing to resolve offline, and nothing registering it connects to. */
const PUBLIC = 'https://203.0.113.10/mcp';
let t: TestApp;
let alice: TestUser;
let bob: TestUser;

setUp(async (start) => {
  const dir = await start.service(mkdtemp(join(tmpdir(), 'parley-mcp-key-')), (d) => rm(d, { recursive: true, force: true }));
  // The guard as in production (https, no address inside), and a key file of its own, which a rotation replaces.
  t = await start.app({
    outbound: { allowHttp: false, allowPrivate: false },
    secrets: { key: undefined, previous: [], keyFile: join(dir, 'secrets.key'), shared: false },
  });
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
});

const create = (user: TestUser, body: Record<string, unknown>) => t.rest('POST', '/v2/mcp/servers', { key: user.apiKey, body });
const row = (id: string) => t.db.mcpServer.findUniqueOrThrow({ where: { id }, select: { authorization: true, headers: true, url: true } });
const gql = <T = any>(query: string, variables: Record<string, unknown>, key: string) =>
  t.gql(parse(query) as TypedDocumentNode<T, Record<string, unknown>>, variables, key);

describe('over REST', () => {
  it('keeps the authorization header sealed in its row and never shows it again', async () => {
    const made = await create(alice, {
      name: 'search',
      url: PUBLIC,
      headers: { Authorization: TOKEN, 'X-Team': 'blue' },
      price_per_call: 3,
    });
    expect(made.status).toBe(201);
    expect(made.body.server).toMatchObject({
      name: 'search',
      url: PUBLIC,
      headers: { 'x-team': 'blue' },
      has_authorization: true,
      price_per_call: 3,
    });
    const id = made.body.server.id;
    const stored = await row(id);
    expect(stored.authorization).toMatch(/^v1\./);
    expect(stored.authorization).not.toContain('mcp-token');
    expect(stored.headers).toEqual({ 'x-team': 'blue' });
    const reads = [
      made,
      await t.rest('GET', `/v2/mcp/servers/${id}`, { key: alice.apiKey }),
      await t.rest('GET', '/v2/mcp/servers', { key: alice.apiKey }),
      await t.rest('PATCH', `/v2/mcp/servers/${id}`, { key: alice.apiKey, body: { price_per_call: 4 } }),
    ];
    for (const read of reads) {
      expect(read.status).toBeLessThan(300);
      expect(JSON.stringify(read.body)).not.toContain('mcp-token');
    }
    expect(reads[3]!.body.server).toMatchObject({ price_per_call: 4, has_authorization: true });
  });

  it("is its owner's alone: another user reads, changes and deletes nothing of it (404)", async () => {
    const made = await create(alice, { name: 'private', url: PUBLIC, headers: { authorization: TOKEN } });
    const id = made.body.server.id;
    const before = await row(id);
    for (const [method, body] of [['GET'], ['PATCH', { headers: { authorization: null } }], ['DELETE']] as const) {
      const answer = await t.rest(method, `/v2/mcp/servers/${id}`, { key: bob.apiKey, body });
      expect(answer.status).toBe(404);
      expect(answer.body).toEqual({ error: 'MCP server not found' });
    }
    expect(await row(id)).toEqual(before);
    expect((await t.rest('GET', '/v2/mcp/servers', { key: bob.apiKey })).body.servers).toEqual([]);
  });

  it('refuses a URL inside (loopback, private, metadata) or over http, naming the field, and saves nothing', async () => {
    const count = () => t.db.mcpServer.count({ where: { userId: alice.id } });
    const before = await count();
    for (const [url, why] of [
      ['https://127.0.0.1/mcp', /its host 127\.0\.0\.1 resolves to 127\.0\.0\.1, a loopback/],
      ['https://169.254.169.254/mcp', /its host 169\.254\.169\.254 resolves to 169\.254\.169\.254/],
      ['https://localhost:9/mcp', /its host localhost resolves to/],
      ['http://203.0.113.10/mcp', /must be an https URL/],
    ] as const) {
      const answer = await create(alice, { name: 'inside', url });
      expect(answer.status).toBe(400);
      expect(answer.body.error).toMatch(new RegExp(`^url: ${why.source}`));
    }
    expect(await count()).toBe(before);
  });

  it('refuses headers the MCP client sets and a name taken, with the field and status, changing nothing', async () => {
    const reserved = await create(alice, { name: 'hdr', url: PUBLIC, headers: { 'Mcp-Session-Id': 'x' } });
    expect(reserved.status).toBe(400);
    expect(reserved.body.error).toBe('headers.Mcp-Session-Id: Mcp-Session-Id: set by the MCP client itself');
    await create(alice, { name: 'twice', url: PUBLIC });
    const taken = await create(alice, { name: 'twice', url: 'https://203.0.113.11/mcp' });
    expect(taken.status).toBe(409);
    expect(taken.body.error).toBe('You already have an MCP server named twice');
    expect(await t.db.mcpServer.count({ where: { userId: alice.id, name: { in: ['hdr', 'twice'] } } })).toBe(1);
  });

  it('removes a header with null, the authorization header too, and deletes the server', async () => {
    const made = await create(alice, {
      name: 'tidy',
      url: PUBLIC,
      headers: { authorization: TOKEN, 'x-a': '1', 'x-b': '2' },
    });
    const path = `/v2/mcp/servers/${made.body.server.id}`;
    const changed = await t.rest('PATCH', path, { key: alice.apiKey, body: { headers: { 'X-A': null, Authorization: null } } });
    expect(changed.body.server).toMatchObject({ headers: { 'x-b': '2' }, has_authorization: false });
    expect((await row(made.body.server.id)).authorization).toBeNull();
    expect((await t.rest('DELETE', path, { key: alice.apiKey })).body).toEqual({ success: true });
    expect((await t.rest('GET', path, { key: alice.apiKey })).status).toBe(404);
  });
});

describe('over GraphQL', () => {
  it('registers, lists on your own profile only, changes and deletes, never showing the authorization header', async () => {
    const made = await gql(
      'mutation($input: CreateMcpServerInput!) { createMcpServer(input: $input) { id rawId name hasAuthorization headers { name value } pricePerCall } }',
      {
        input: {
          name: 'graph',
          url: PUBLIC,
          headers: [
            { name: 'Authorization', value: TOKEN },
            { name: 'X-Team', value: 'red' },
          ],
        },
      },
      alice.apiKey,
    );
    expect(made.errors).toBeUndefined();
    const server = made.data.createMcpServer;
    expect(server).toMatchObject({ name: 'graph', hasAuthorization: true, headers: [{ name: 'x-team', value: 'red' }], pricePerCall: 0 });
    const mine = await gql('{ me { mcpServers { rawId name } } }', {}, alice.apiKey);
    expect(mine.data.me.mcpServers.map((s: { name: string }) => s.name)).toContain('graph');
    expect(JSON.stringify(mine)).not.toContain('mcp-token');
    const node = await gql('query($id: ID!) { node(id: $id) { ... on McpServer { name } } }', { id: server.id }, bob.apiKey);
    expect(node.data?.node ?? null).toBeNull();
    expect(node.errors?.[0]?.message).toBe('MCP server not found');

    const updated = await gql(
      'mutation($id: ID!, $input: UpdateMcpServerInput!) { updateMcpServer(id: $id, input: $input) { pricePerCall headers { name } hasAuthorization } }',
      { id: server.rawId, input: { pricePerCall: 7, headers: [{ name: 'x-team', value: null }] } },
      alice.apiKey,
    );
    expect(updated.data.updateMcpServer).toEqual({ pricePerCall: 7, headers: [], hasAuthorization: true });
    const twice = await gql(
      'mutation($id: ID!, $input: UpdateMcpServerInput!) { updateMcpServer(id: $id, input: $input) { name } }',
      {
        id: server.rawId,
        input: {
          headers: [
            { name: 'X-A', value: '1' },
            { name: 'x-a', value: '2' },
          ],
        },
      },
      alice.apiKey,
    );
    expect(twice.errors?.[0]).toMatchObject({ message: 'headers: names a header twice', extensions: { code: 'BAD_USER_INPUT' } });
    const deleted = await gql('mutation($id: ID!) { deleteMcpServer(id: $id) }', { id: server.rawId }, alice.apiKey);
    expect(deleted.data.deleteMcpServer).toBe(server.id);
  });
});

describe('the sealing key', () => {
  it('counts the authorization headers sealed with it, and a rotation seals them again under the new key', async () => {
    const made = await create(bob, { name: 'sealed', url: PUBLIC, headers: { authorization: TOKEN } });
    const before = (await row(made.body.server.id)).authorization!;
    const keyBefore = before.split('.')[1];
    const counted = await deploymentStore(t.db).sealedKeys();
    expect(counted.find((k) => k.keyId === keyBefore)?.mcpServers).toBe(
      await t.db.mcpServer.count({ where: { authorization: { not: null } } }),
    );

    const rotated = await t.services.deployments.rotateKey();
    expect(rotated.unreadable).toEqual([]);
    const after = (await row(made.body.server.id)).authorization!;
    expect(after.split('.')[1]).not.toBe(keyBefore);
    const recounted = await deploymentStore(t.db).sealedKeys();
    expect(recounted.map((k) => k.keyId)).toEqual([after.split('.')[1]]);
  });
});

describe("a server's tools, from the SDK's own server on loopback", () => {
  let app: TestApp;
  let carol: TestUser;
  let tools: McpToolServer;

  setUp(async (start) => {
    tools = await start.service(startMcpToolServer({ authorization: TOKEN }));
    // The server is on loopback, over http: what an operator allows for tests and private networks.
    app = await start.app({ outbound: { allowHttp: true, allowPrivate: true }, mcp: { timeoutMs: 2_000 } });
    carol = await app.createUser('carol');
  });

  const register = async (name: string, headers: Record<string, string>, url = tools.url) =>
    (await app.rest('POST', '/v2/mcp/servers', { key: carol.apiKey, body: { name, url, headers } })).body.server.id as string;

  it('lists them with their JSON Schemas over REST and GraphQL, sending the sealed authorization header', async () => {
    const id = await register('loop', { authorization: TOKEN });
    const listed = await app.rest('GET', `/v2/mcp/servers/${id}/tools`, { key: carol.apiKey });
    expect(listed.status).toBe(200);
    const echo = listed.body.tools.find((x: { name: string }) => x.name === 'echo');
    expect(echo).toEqual({
      name: 'echo',
      title: null,
      description: 'Says the text back',
      input_schema: expect.objectContaining({
        type: 'object',
        properties: { text: { type: 'string', maxLength: 200 } },
        required: ['text'],
      }),
    });
    expect(tools.requests.at(-1)?.authorization).toBe(TOKEN);
    const viaGraphQL = await app.gql(
      parse('{ me { mcpServers { name tools { name inputSchema } } } }') as TypedDocumentNode<any, Record<string, unknown>>,
      {},
      carol.apiKey,
    );
    expect(viaGraphQL.errors).toBeUndefined();
    const loop = viaGraphQL.data.me.mcpServers.find((s: { name: string }) => s.name === 'loop');
    expect(loop.tools.map((x: { name: string }) => x.name).sort()).toEqual(['echo', 'fail', 'hang', 'paced', 'slow', 'snapshot']);
  });

  it('is 503 with the reason when the server refuses or is not there, and 404 for a stranger, who reaches nothing', async () => {
    const wrong = await register('wrong', { authorization: 'Bearer wrong' });
    const refused = await app.rest('GET', `/v2/mcp/servers/${wrong}/tools`, { key: carol.apiKey });
    expect(refused.status).toBe(503);
    expect(refused.body.error).toBe('The MCP server wrong could not be used: the server answered HTTP 401');
    const gone = await register('gone', {}, 'http://127.0.0.1:9/mcp');
    const down = await app.rest('GET', `/v2/mcp/servers/${gone}/tools`, { key: carol.apiKey });
    expect(down.status).toBe(503);
    expect(down.body.error).toBe('The MCP server gone could not be used: the connection was refused');
    const asked = tools.requests.length;
    const stranger = await app.createUser('dave');
    expect((await app.rest('GET', `/v2/mcp/servers/${wrong}/tools`, { key: stranger.apiKey })).status).toBe(404);
    expect(tools.requests.length).toBe(asked);
  });
});
