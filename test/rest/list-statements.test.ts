import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * The REST lists the SDK's v2 methods read cost a fixed number of SQL statements however many
 * rows a page holds: relations (owners, agents, creators) are read with the rows, never one row at
 * a time.
 */
describe('new REST lists: no statement per row', () => {
  let t: TestApp;
  let f: ReturnType<typeof fixtures>;
  let alice: TestUser;

  setUp(async (start) => {
    t = await start.app();
    f = fixtures(t);
    alice = await t.createUser('alice');
  });

  /** The statements one GET costs (the fewest of three: `countQueries`), and its body. */
  async function statementsFor(path: string) {
    let body: any;
    const count = await t.countQueries(async () => {
      const res = await t.rest('GET', path, { key: alice.apiKey });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      body = res.body;
    });
    return { count, body };
  }

  it('GET /v2/collections/light: 30 collections of 3 creations cost what 3 do', async () => {
    const fill = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const creations = [await f.creation(alice), await f.creation(alice, { public: false }), await f.creation(alice)];
        await t.services.collections.create({ id: alice.id }, { name: `C${i}`, creationIds: creations.map((c) => c.id) });
      }
    };
    await fill(3);
    const small = await statementsFor('/v2/collections/light');
    expect(small.body.collections).toHaveLength(3);
    await fill(27);
    const large = await statementsFor('/v2/collections/light');
    expect(large.body.collections).toHaveLength(30);
    expect(large.body.collections.every((c: { creations: string[] }) => c.creations.length === 3)).toBe(true);
    expect(large.count).toBe(small.count);
  });

  it('GET /v2/collections/{id}/creations: 60 creations (by agents, populated) cost what 4 do', async () => {
    const agent = await f.agent(alice);
    const made = await t.services.collections.create({ id: alice.id }, { name: 'Growing' });
    const add = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const c = await f.creation(alice, { agentId: agent.id });
        await t.services.collections.add({ id: alice.id }, made.id, { creationIds: [c.id] });
      }
    };
    await add(4);
    const small = await statementsFor(`/v2/collections/${made.id}/creations?limit=100`);
    expect(small.body.docs).toHaveLength(4);
    await add(56);
    const large = await statementsFor(`/v2/collections/${made.id}/creations?limit=100`);
    expect(large.body.docs).toHaveLength(60);
    expect(large.body.docs.every((d: { user: { username: string } }) => d.user.username === 'alice')).toBe(true);
    expect(large.count).toBe(small.count);
    // The collection itself carries its first page, cover and count: the same few statements.
    const one = await statementsFor(`/v2/collections/${made.id}`);
    expect(one.body.collection.creations).toHaveLength(20);
    expect(one.count).toBeLessThanOrEqual(large.count + 1);
  });

  it('GET /v2/models: 50 models with their owners cost what 5 do', async () => {
    const bob = await t.createUser('bob');
    for (let i = 0; i < 5; i++) await f.model(i % 2 ? bob : alice, { public: true });
    const small = await statementsFor('/v2/models?limit=100');
    const before = small.body.docs.length;
    for (let i = 0; i < 45; i++) await f.model(i % 2 ? bob : alice, { public: true });
    const large = await statementsFor('/v2/models?limit=100');
    expect(large.body.docs).toHaveLength(before + 45);
    expect(large.count).toBe(small.count);
  });

  it('GET /v2/threads: 12 threads with their owners and agents cost what 2 do', async () => {
    const agent = await f.agent(alice, { image: 'https://cdn.example.com/a.png' });
    const start = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const res = await t.rest('POST', '/v2/threads', { key: alice.apiKey, body: { agent_id: agent.id, content: `Hello ${i}` } });
        await settledSession(t, alice, res.body.thread_id);
      }
    };
    await start(2);
    const small = await statementsFor(`/v2/threads?agent_id=${agent.id}&limit=100`);
    expect(small.body.docs).toHaveLength(2);
    await start(10);
    const large = await statementsFor(`/v2/threads?agent_id=${agent.id}&limit=100`);
    expect(large.body.docs).toHaveLength(12);
    expect(large.body.docs.every((d: { agent: { _id: string } }) => d.agent._id === agent.id)).toBe(true);
    expect(large.count).toBe(small.count);
  });
});
