import { beforeAll, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import {
  expectAuthError,
  expectError,
  expectRejectsBadKeys,
  isoDate,
  rawRequest,
  unknownWellFormedKey,
  withWrongSecret,
} from '../helpers/rest-helpers.ts';
import { setUp } from '../helpers/set-up.ts';

// What is the caller's over REST: their keys (DELETE /apikeys), and their agents' deployments and
// triggers (GET /v2/agents/deployments and /v2/agents/triggers), on one app with nothing configured.

let t: TestApp;

setUp(async (start) => {
  t = await start.app();
});

describe('DELETE /apikeys', () => {
  /** A second key for a user, issued the same way as the first. */
  const issueKey = async (userId: string) => (await t.services.apiKeys.create(userId)).apiKey;
  const keyWorks = async (key: string) => (await t.rest('GET', '/v2/creators/me', { key })).status === 200;

  it('refuses a missing, malformed or unknown caller key with 401 {error}', async () => {
    const alice = await t.createUser();
    const other = await issueKey(alice.id);
    expect(await expectRejectsBadKeys(t, 'DELETE', '/apikeys', { apiKey: other })).toBe(true);
    // A well-formed key whose id exists but whose secret is wrong is refused too.
    expectAuthError(await t.rest('DELETE', '/apikeys', { key: withWrongSecret(alice.apiKey), body: { apiKey: other } }));
    // None of those deleted the key named in the body.
    expect(await keyWorks(other)).toBe(true);
    expect(await t.db.apiKey.count({ where: { userId: alice.id } })).toBe(2);
  });

  it('answers 400 {message:"Missing apiKey"} without a body, with {} and with a non-string apiKey', async () => {
    const alice = await t.createUser();
    for (const options of [
      {},
      { body: {} },
      { body: { apiKey: '' } },
      { body: { apiKey: 42 } },
      { body: { apiKey: null } },
      { body: { key: alice.apiKey } },
    ]) {
      const res = await t.rest('DELETE', '/apikeys', { key: alice.apiKey, ...options });
      expectError(res, 400, 'message', 'Missing apiKey');
    }
    expect(await keyWorks(alice.apiKey)).toBe(true);
  });

  it('refuses to delete another user\'s key with 401 {message:"API key not found"}; that key keeps working', async () => {
    const alice = await t.createUser();
    const bob = await t.createUser();
    const res = await t.rest('DELETE', '/apikeys', { key: alice.apiKey, body: { apiKey: bob.apiKey } });
    expectError(res, 401, 'message', 'API key not found');
    expect(await keyWorks(bob.apiKey)).toBe(true);
    expect(await keyWorks(alice.apiKey)).toBe(true);
    expect(await t.db.apiKey.count({ where: { userId: bob.id } })).toBe(1);
  });

  it('answers 401 {message:"API key not found"} for an unknown, malformed or wrong-secret key', async () => {
    const alice = await t.createUser();
    const second = await issueKey(alice.id);
    for (const apiKey of [unknownWellFormedKey(), 'nope', withWrongSecret(second)]) {
      const res = await t.rest('DELETE', '/apikeys', { key: alice.apiKey, body: { apiKey } });
      expectError(res, 401, 'message', 'API key not found');
    }
    // The key whose id was used with a wrong secret was not deleted.
    expect(await keyWorks(second)).toBe(true);
    expect(await t.db.apiKey.count({ where: { userId: alice.id } })).toBe(2);
  });

  it('deletes one of my other keys: 200 {}, the deleted key fails on the very next request, the calling key still works', async () => {
    const alice = await t.createUser();
    const second = await issueKey(alice.id);
    expect(await keyWorks(second)).toBe(true);

    const res = await t.rest('DELETE', '/apikeys', { key: alice.apiKey, body: { apiKey: second } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});

    expectAuthError(await t.rest('GET', '/v2/creators/me', { key: second }));
    expect(await keyWorks(alice.apiKey)).toBe(true);
    expect(await t.db.apiKey.count({ where: { userId: alice.id } })).toBe(1);

    // Deleting it again: it is gone.
    expectError(await t.rest('DELETE', '/apikeys', { key: alice.apiKey, body: { apiKey: second } }), 401, 'message', 'API key not found');
  });

  it('deletes the key I am calling with; it fails at once, my other key still works', async () => {
    const alice = await t.createUser();
    const second = await issueKey(alice.id);
    const res = await t.rest('DELETE', '/apikeys', { key: alice.apiKey, body: { apiKey: alice.apiKey } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});

    expectAuthError(await t.rest('GET', '/v2/creators/me', { key: alice.apiKey }));
    expectAuthError(await t.rest('DELETE', '/apikeys', { key: alice.apiKey, body: { apiKey: second } }));
    expect(await keyWorks(second)).toBe(true);
  });

  it('stores no plaintext: no column of any key row contains the key or its secret', async () => {
    const alice = await t.createUser();
    const secret = alice.apiKey.slice(20);
    expect(secret).toHaveLength(43);
    const rows = await t.db.apiKey.findMany({ where: { userId: alice.id }, omit: { hash: false } });
    expect(rows).toHaveLength(1);
    const row = rows[0]!;
    expect(row.hash).toMatch(/^[0-9a-f]{64}$/);
    for (const [column, value] of Object.entries(row)) {
      const text = value instanceof Date ? value.toISOString() : String(value);
      expect(text, column).not.toContain(secret);
      expect(text, column).not.toContain(alice.apiKey);
    }
    // Nor does any other key row in the table.
    const all = JSON.stringify(await t.db.apiKey.findMany({ omit: { hash: false } }));
    expect(all).not.toContain(secret);
  });

  it('reads the keys of requests that arrive together in one statement, each checked as if alone', async () => {
    const users = await Promise.all([t.createUser(), t.createUser(), t.createUser()]);
    const deleted = await issueKey(users[0]!.id);
    await t.services.apiKeys.delete(await t.services.apiKeys.authenticate(deleted), deleted);
    const asked = [...users.flatMap((u) => Array.from({ length: 10 }, () => u.apiKey)), deleted, withWrongSecret(users[1]!.apiKey)];
    const before = t.queries.length;
    const outcomes = await Promise.all(
      asked.map((key) =>
        t.services.apiKeys.authenticate(key).then(
          (viewer) => viewer.id,
          (e: { code: string }) => e.code,
        ),
      ),
    );
    expect(t.queries.slice(before).filter((q) => q.includes('FROM "ApiKey" AS k'))).toHaveLength(1);
    expect(outcomes).toEqual([...users.flatMap((u) => Array.from({ length: 10 }, () => u.id)), 'UNAUTHENTICATED', 'UNAUTHENTICATED']);
  });
});

describe('REST agent deployments and triggers', () => {
  let f: ReturnType<typeof fixtures>;
  let alice: TestUser;
  let bob: TestUser;
  let carol: TestUser;
  let secretSeq = 0;

  beforeAll(async () => {
    f = fixtures(t);
    alice = await t.createUser('alice');
    bob = await t.createUser('bob');
    carol = await t.createUser('carol');
  });

  // Yesterday on the real clock (whole minutes), which the rows the service makes are stamped by.
  const yesterday = Math.floor(Date.now() / 60_000) * 60_000 - 86_400_000;
  const at = (minutes: number) => new Date(yesterday + minutes * 60_000);

  const deployment = (agentId: string, userId: string, platform: 'discord' | 'telegram' | 'twitter', createdAt: Date) =>
    t.db.deployment.create({
      data: {
        agentId,
        userId,
        platform,
        config: { channel: `chan-${platform}` },
        secrets: { bot_token: `TOPSECRET-${++secretSeq}-xyz` },
        valid: platform !== 'twitter',
        createdAt,
      },
      omit: { secrets: false },
    });

  const trigger = (agentId: string, userId: string, createdAt: Date, fields: Record<string, unknown> = {}) =>
    t.db.trigger.create({
      data: {
        agentId,
        userId,
        name: `Trigger at ${createdAt.toISOString()}`,
        cron: '0 0 9 * * 1-5',
        timezone: 'Europe/Paris',
        prompt: 'Say good morning',
        createdAt,
        ...fields,
      },
    });

  describe('auth', () => {
    it.each(['/v2/agents/deployments', '/v2/agents/triggers'])(
      'GET %s answers 401 {error} for missing, malformed and unknown keys',
      async (path) => {
        expect(await expectRejectsBadKeys(t, 'GET', path)).toBe(true);
      },
    );
  });

  describe('GET /v2/agents/deployments', () => {
    it('lists the deployments of my agents only, newest first, with exactly the public fields', async () => {
      const a1 = await f.agent(alice);
      const a2 = await f.agent(alice, { public: false });
      const b1 = await f.agent(bob);
      const middle = await deployment(a1.id, alice.id, 'discord', at(20));
      const oldest = await deployment(a2.id, alice.id, 'telegram', at(10));
      const newest = await deployment(a1.id, alice.id, 'twitter', at(30));
      const bobs = await deployment(b1.id, bob.id, 'discord', at(40));

      const res = await t.rest('GET', '/v2/agents/deployments', { key: alice.apiKey });
      expect(res.status).toBe(200);
      expect(Object.keys(res.body)).toEqual(['deployments']);
      expect(res.body.deployments).toEqual(
        [newest, middle, oldest].map((d) => ({
          _id: d.id,
          id: d.id,
          agent: d.agentId,
          user: alice.id,
          platform: d.platform,
          // The SDK's allowlists are always there, empty when the deployment has none.
          config: { channel: `chan-${d.platform}`, discord: { channel_allowlist: [] }, telegram: { topic_allowlist: [] } },
          valid: d.platform !== 'twitter',
          // Made behind the service's back: never deployed, so stopped (or invalid once refused).
          state: d.platform === 'twitter' ? 'invalid' : 'stopped',
          last_error: null,
          account: null,
          createdAt: d.createdAt.toISOString(),
          updatedAt: d.updatedAt.toISOString(),
        })),
      );
      expect(res.body.deployments.map((d: any) => d.id)).not.toContain(bobs.id);

      const bobRes = await t.rest('GET', '/v2/agents/deployments', { key: bob.apiKey });
      expect(bobRes.body.deployments.map((d: any) => d.id)).toEqual([bobs.id]);
    });

    it('never returns secrets: no "secrets" key and no secret value in the raw response', async () => {
      const agent = await f.agent(carol);
      const d = await deployment(agent.id, carol.id, 'telegram', at(50));
      const secret = (d.secrets as { bot_token: string }).bot_token;
      expect(secret).toMatch(/^TOPSECRET-/);
      const raw = await rawRequest(t, 'GET', '/v2/agents/deployments', { key: carol.apiKey });
      expect(raw.status).toBe(200);
      expect(raw.text).toContain(d.id);
      expect(raw.text).not.toContain(secret);
      expect(raw.text).not.toContain('TOPSECRET');
      expect(raw.text).not.toContain('bot_token');
      expect(raw.text).not.toMatch(/secrets/i);
      const body = JSON.parse(raw.text);
      for (const item of body.deployments)
        expect(Object.keys(item).sort()).toEqual([
          '_id',
          'account',
          'agent',
          'config',
          'createdAt',
          'id',
          'last_error',
          'platform',
          'state',
          'updatedAt',
          'user',
          'valid',
        ]);
    });

    it('lists deployments by agent ownership: one made by another user on my agent is mine to see, not theirs', async () => {
      const dana = await t.createUser('dana');
      const erin = await t.createUser('erin');
      const danasAgent = await f.agent(dana);
      const d = await deployment(danasAgent.id, erin.id, 'discord', at(5));
      const danas = await t.rest('GET', '/v2/agents/deployments', { key: dana.apiKey });
      expect(danas.body.deployments.map((x: any) => [x.id, x.user])).toEqual([[d.id, erin.id]]);
      const erins = await t.rest('GET', '/v2/agents/deployments', { key: erin.apiKey });
      expect(erins.body).toEqual({ deployments: [] });
    });

    it('returns an empty list for a user without agents', async () => {
      const lonely = await t.createUser('lonely');
      const res = await t.rest('GET', '/v2/agents/deployments', { key: lonely.apiKey });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ deployments: [] });
    });
  });

  describe('GET /v2/agents/triggers', () => {
    it("lists the triggers of my agents only, newest first, with every field, the earlier body's among them", async () => {
      const frank = await t.createUser('frank');
      const a1 = await f.agent(frank);
      const a2 = await f.agent(frank, { public: false });
      const other = await f.agent(bob);
      const session = await t.db.session.create({ data: { ownerId: frank.id, title: 'Mornings' } });
      // Rows written here, not through the service: no job waits for them (`queuedFor` says one does).
      const older = await trigger(a1.id, frank.id, at(1), { cron: null });
      const newer = await trigger(a2.id, frank.id, at(2), {
        sessionId: session.id,
        sessionTarget: 'existing',
        status: 'paused',
        lastRunTime: at(3),
        nextRun: at(4),
        queuedFor: at(4),
        timezone: 'UTC',
      });
      const bobs = await trigger(other.id, bob.id, at(9), { cron: null });

      const res = await t.rest('GET', '/v2/agents/triggers', { key: frank.apiKey });
      expect(res.status).toBe(200);
      const common = {
        name: expect.any(String),
        user: frank.id,
        prompt: 'Say good morning',
        trigger_prompt: 'Say good morning',
        context: null,
        error_count: 0,
        last_error: null,
        runs: [],
        updatedAt: isoDate,
      };
      expect(res.body).toEqual({
        triggers: [
          {
            ...common,
            _id: newer.id,
            id: newer.id,
            agent: a2.id,
            session: session.id,
            session_target: 'existing',
            schedule: {
              second: '0',
              minute: '0',
              hour: '9',
              day_of_month: '*',
              month: '*',
              day_of_week: '1-5',
              timezone: 'UTC',
              start_date: null,
              end_date: null,
              cron: '0 9 * * 1-5',
            },
            status: 'paused',
            last_run_time: at(3).toISOString(),
            next_scheduled_run: at(4).toISOString(),
            last_run: at(3).toISOString(),
            next_run: at(4).toISOString(),
            createdAt: at(2).toISOString(),
          },
          {
            ...common,
            _id: older.id,
            id: older.id,
            agent: a1.id,
            session: null,
            session_target: 'new',
            schedule: null,
            status: 'active',
            last_run_time: null,
            next_scheduled_run: null,
            last_run: null,
            next_run: null,
            createdAt: at(1).toISOString(),
          },
        ],
      });
      expect(res.body.triggers.map((x: any) => x.id)).not.toContain(bobs.id);
      const bobRes = await t.rest('GET', '/v2/agents/triggers', { key: bob.apiKey });
      expect(bobRes.status).toBe(200);
      expect(bobRes.body.triggers.map((x: any) => x.id)).toEqual([bobs.id]);
    });

    it('returns an empty list for a user without agents', async () => {
      const lonely = await t.createUser('lonely2');
      const res = await t.rest('GET', '/v2/agents/triggers', { key: lonely.apiKey });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ triggers: [] });
    });
  });
});
