import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import fc from 'fast-check';
import type { TestApp, TestUser } from './app.ts';
import { fixtures } from './fixtures.ts';

/**
 * Shared pieces of the fuzz tests (test/fuzz/): a small world of rows to aim at, a digest of the
 * whole database to prove refused requests change nothing, raw HTTP that sends what fetch would
 * refuse to, and the value generators.
 */

/** Runs per route or GraphQL field; FUZZ_RUNS=2000 npx vitest run test/fuzz for a long hunt. */
export const fuzzRuns = (fallback: number) => Number(process.env.FUZZ_RUNS ?? fallback);
/** A fixed seed, so a failure is reproducible; FUZZ_SEED=<n> explores elsewhere. */
export const fuzzSeed = Number(process.env.FUZZ_SEED ?? 20261123);

export interface World {
  alice: TestUser;
  bob: TestUser;
  /** A second key of alice's, that requests may try to delete (the one they use must survive). */
  spareKey: string;
  /** Ids of every kind, by the name path parameters use. */
  ids: Record<'agent' | 'concept' | 'model' | 'creation' | 'session' | 'share' | 'message' | 'memory' | 'user', string[]>;
  usernames: string[];
}

/** Two users with agents (public and private), concepts, models, creations, sessions with replies, a share, memories, deployments and triggers. */
export async function seedWorld(t: TestApp): Promise<World> {
  const alice = await t.createUser('alice');
  const bob = await t.createUser('bob');
  const carol = await t.createUser('carol');
  const spareKey = (await t.services.apiKeys.create(alice.id)).apiKey;
  const f = fixtures(t);
  const viewer = (u: TestUser) => t.services.apiKeys.authenticate(u.apiKey);
  const agents = [await f.agent(alice), await f.agent(alice, { public: false }), await f.agent(bob, { public: false }), await f.agent(bob)];
  const concepts = [await f.concept(alice), await f.concept(bob)];
  const models = [await f.model(alice), await f.model(bob, { public: false })];
  const creations = [await f.creation(alice), await f.creation(bob, { public: false }), await f.creation(bob, { agentId: agents[3]!.id })];
  await t.services.creations.like(await viewer(alice), creations[2]!.id);
  const sessions = [
    await t.services.sessions.send(await viewer(alice), { agentIds: [agents[0]!.id], content: 'Hello there', title: 'Alice talks' }),
    await t.services.sessions.send(await viewer(bob), { agentIds: [agents[3]!.id], content: 'Hi', title: 'Bob talks' }),
  ];
  await t.services.sessions.addUser(await viewer(bob), sessions[1]!.sessionId, { username: 'alice', permission: 'editor' });
  await t.services.replies.drain(30_000);
  const share = await t.services.shares.create(await viewer(alice), sessions[0]!.sessionId);
  for (const agent of [agents[0]!, agents[3]!]) {
    await f.deployment(agent.id, agent.id === agents[0]!.id ? alice.id : bob.id);
    await f.trigger(agent.id, agent.id === agents[0]!.id ? alice.id : bob.id);
  }
  const memory = await t.db.memory.create({ data: { agentId: agents[0]!.id, userId: alice.id, fact: 'likes tea', key: 'drink' } });
  const messages = await t.db.message.findMany({ select: { id: true } });
  return {
    alice,
    bob,
    spareKey,
    ids: {
      agent: agents.map((a) => a.id),
      concept: concepts.map((c) => c.id),
      model: models.map((m) => m.id),
      creation: creations.map((c) => c.id),
      session: sessions.map((s) => s.sessionId),
      share: [share.shareId],
      message: messages.map((m) => m.id),
      memory: [memory.id],
      user: [alice.id, bob.id, carol.id],
    },
    usernames: ['alice', 'bob', 'carol'],
  };
}

/**
 * One text for the whole database: every table's rows, hashed. Equal digests before and after
 * a request mean it changed nothing anywhere.
 */
export async function databaseDigest(t: TestApp): Promise<string> {
  const tables = await t.db.$queryRawUnsafe<{ name: string }[]>(
    `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name <> '_prisma_migrations' ORDER BY 1`,
  );
  const parts = tables.map(
    ({ name }) =>
      `SELECT '${name}' AS name, count(*)::int AS rows, md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) AS hash FROM "${name}" x`,
  );
  const rows = await t.db.$queryRawUnsafe<{ name: string; rows: number; hash: string }[]>(parts.join(' UNION ALL '));
  return rows.map((r) => `${r.name}:${r.rows}:${r.hash}`).join('\n');
}

/** Waits for replies started by a request to be written, then for the database to stop changing. */
export async function settledDigest(t: TestApp): Promise<string> {
  await t.services.replies.drain(30_000);
  let previous = await databaseDigest(t);
  for (;;) {
    await new Promise((r) => setTimeout(r, 20));
    const next = await databaseDigest(t);
    if (next === previous) return next;
    previous = next;
  }
}

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/**
 * One request as sent, byte for byte (no normalization of the path or headers); null when Node's
 * client itself refuses to send it (a character HTTP does not allow). An event stream that
 * starts is abandoned once its headers arrive: its status is the answer.
 */
export function sendRaw(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<RawResponse | null> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    let req;
    try {
      // Node's client sends no length with a DELETE body; the server would read it as a next request.
      const length = body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) };
      req = httpRequest({ hostname, port, method, path, headers: { ...headers, ...length }, agent: false });
    } catch {
      return resolve(null);
    }
    const timer = setTimeout(() => req.destroy(new Error(`no answer within 15 s to ${method} ${path}`)), 15_000);
    req.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    req.on('response', (res) => {
      // A refusal sent as an event stream (GraphQL over SSE) ends; it is read like any other.
      if (res.statusCode === 200 && String(res.headers['content-type']).startsWith('text/event-stream')) {
        clearTimeout(timer);
        res.destroy();
        return resolve({ status: res.statusCode!, headers: res.headers, text: '' });
      }
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode!, headers: res.headers, text });
      });
    });
    try {
      req.end(body);
    } catch {
      clearTimeout(timer);
      req.destroy();
      resolve(null);
    }
  });
}

/** Strings a hostile or careless client sends: empty, huge, control and astral characters, number-likes, paths, injections. */
export function hostileText(ids: string[]): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...ids) },
    { weight: 3, arbitrary: fc.string({ maxLength: 40 }) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        '',
        ' ',
        '0',
        '-1',
        '1e309',
        'NaN',
        'null',
        'true',
        '[]',
        '{}',
        '\u0000',
        'a\u0000b',
        '\ud800',
        '🙂',
        'ＡＬＩＣＥ',
        'alice',
        '__proto__',
        'constructor',
        "' OR 1=1 --",
        '$where',
        'javascript:alert(1)',
        'https://example.com/a.png',
        'x'.repeat(5000),
        '9'.repeat(400),
        'thumbs_up',
        'editor',
        'owner',
        'low',
        'off',
      ),
    },
    { weight: 1, arbitrary: fc.constantFrom(...ids).map((id) => `${id}x`) },
  );
}

/** Mostly ordinary text, sometimes hostile: values most requests would accept. */
export function plausibleText(ids: string[]): fc.Arbitrary<string> {
  return fc.oneof({ weight: 3, arbitrary: fc.string({ maxLength: 30 }) }, { weight: 1, arbitrary: hostileText(ids) });
}

/** Any JSON value, with hostile strings and ids among the leaves. */
export function hostileJson(ids: string[], keys: string[]): fc.Arbitrary<unknown> {
  const text = hostileText(ids);
  const leaf = fc.oneof(
    text,
    fc.integer(),
    fc.double(),
    fc.boolean(),
    fc.constant(null),
    fc.constantFrom(2 ** 31, -(2 ** 53), 1e308, 0.5, -0),
  );
  return fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      leaf,
      fc.array(tie('value'), { maxLength: 4 }),
      fc.dictionary(fc.oneof(fc.constantFrom(...keys), fc.string({ maxLength: 8 })), tie('value'), { maxKeys: 5 }),
    ),
  })).value;
}
