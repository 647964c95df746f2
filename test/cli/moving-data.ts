import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { Sql } from '../../src/db/sql.ts';
import { runCli, type ServerProcess } from '../helpers/process.ts';

/**
 * What backups, restores and copies must carry over, as a user sees it: a service filled the
 * way users fill it (the CLI through the running service, REST, GraphQL), and the answers it
 * gives, to compare with those of the service started on the copy.
 */

export const SEARCHES = ['lighthouse in a thunderstorm', 'fox reading under a streetlamp', 'cat asleep on a stack of zines'];
export const MEDIA_FILE = 'moved-0001.png';
export const MEDIA_BYTES = Buffer.from('89504e470d0a1a0a' + 'ab'.repeat(3000), 'hex');

/** Separate queries: together they would pass the API's query cost limit. */
const VIEWS = [
  `{ me { username subscriptionBalance foreverBalance ledger(first: 50) { edges { node { id amount kind balanceAfter reason } } } } }`,
  `{ sessions(first: 5) { edges { node { id title status
    messages(first: 20) { edges { node { id role content status reactions { reaction count } } } } } } } }`,
  `{ agents(first: 10) { edges { node { id name memories { fact } } } } }`,
];

export async function graphql(url: string, apiKey: string, query: string, variables: Record<string, unknown> = {}) {
  const res = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: Record<string, unknown>; errors?: unknown[] };
  expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
  return body.data!;
}

export interface View {
  me: unknown;
  graphql: unknown;
  searches: { id: string; score: number }[][];
}

/** What one user sees: their profile (REST), balances, ledger, sessions, memories (GraphQL), and searches. */
export async function view(url: string, apiKey: string): Promise<View> {
  const me = await fetch(`${url}/v2/creators/me`, { headers: { 'x-api-key': apiKey } });
  expect(me.status).toBe(200);
  const searches = [];
  for (const query of SEARCHES) {
    const res = await fetch(`${url}/v2/creations/search?query=${encodeURIComponent(query)}&limit=20`, { headers: { 'x-api-key': apiKey } });
    expect(res.status).toBe(200);
    const page = (await res.json()) as { docs: { _id: string; score: number }[] };
    searches.push(page.docs.map((d) => ({ id: d._id, score: d.score })));
  }
  expect(searches.flat().length).toBeGreaterThan(0);
  const answers = [];
  for (const query of VIEWS) answers.push(await graphql(url, apiKey, query));
  return { me: await me.json(), graphql: answers, searches };
}

/** Two views alike: the same data; search scores to float precision (real[] and vector(768) compute them apart). */
export function expectSameView(actual: View, expected: View) {
  expect(actual.me).toEqual(expected.me);
  expect(actual.graphql).toEqual(expected.graphql);
  expect(actual.searches.map((s) => s.map((d) => d.id))).toEqual(expected.searches.map((s) => s.map((d) => d.id)));
  actual.searches.flat().forEach((d, i) => expect(d.score).toBeCloseTo(expected.searches.flat()[i]!.score, 4));
}

async function cli(args: string[], env: Record<string, string>) {
  const result = await runCli(args, env);
  expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(0);
  return result;
}

/**
 * Fills the service in `dataDir` as users would: the demo data (users, keys, agents, sessions,
 * messages, reactions, shares, creations with their vectors, ledger), a manna grant, a prompt
 * whose reply leaves a memory, a like, and a media file. Returns the users' keys and the public
 * creations (to like).
 */
export async function fill(server: ServerProcess, dataDir: string) {
  const env = { DATA_DIR: dataDir };
  const manifest = JSON.parse((await cli(['demo', '--json'], env)).stdout) as {
    users: { username: string; apiKey: string }[];
    agents: { id: string }[];
    creations: { id: string; public: boolean }[];
  };
  const alice = manifest.users.find((u) => u.username === 'alice')!.apiKey;
  await cli(['manna', 'grant', 'alice', '12.5'], env);
  const like = await fetch(`${server.url}/v2/creations/${manifest.creations[0]!.id}/like`, {
    method: 'POST',
    headers: { 'x-api-key': alice },
  });
  expect(like.status).toBe(200);
  const agent = manifest.agents[0]!.id;
  const prompt = await fetch(`${server.url}/v2/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': alice },
    body: JSON.stringify({ content: 'Hello! My name is Erin, and I draw lighthouses.', agent_ids: [agent] }),
  });
  expect(prompt.status).toBe(200);
  // The reply is written, and then remembered, after the answer: wait for the memory it leaves.
  for (;;) {
    const data = (await graphql(server.url, alice, 'query($id: ID!) { agent(id: $id) { memories { fact } } }', { id: agent })) as {
      agent: { memories: { fact: string }[] };
    };
    if (data.agent.memories.some((m) => m.fact.includes('Erin'))) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  await mkdir(join(dataDir, 'media'), { recursive: true });
  await writeFile(join(dataDir, 'media', MEDIA_FILE), MEDIA_BYTES);
  const bob = manifest.users.find((u) => u.username === 'bob')!.apiKey;
  return { alice, bob, publicCreations: manifest.creations.filter((c) => c.public).map((c) => c.id) };
}

/**
 * What must hold in any consistent copy, whatever was being written when it was taken: every
 * balance is the sum of its ledger rows, and every like count the number of likes.
 */
export async function expectConsistent(sql: Sql) {
  const balances = await sql.rows(`SELECT u.username FROM "User" u
    WHERE u."subscriptionBalance" <> coalesce((SELECT sum(amount) FROM "MannaLedger" l WHERE l."userId" = u.id AND l.kind = 'subscription'), 0)
       OR u."foreverBalance" <> coalesce((SELECT sum(amount) FROM "MannaLedger" l WHERE l."userId" = u.id AND l.kind = 'forever'), 0)`);
  expect(balances).toEqual([]);
  const likes = await sql.rows(
    `SELECT c.id FROM "Creation" c WHERE c."likeCount" <> (SELECT count(*) FROM "Like" l WHERE l."creationId" = c.id)`,
  );
  expect(likes).toEqual([]);
  const [[ledgerRows]] = (await sql.rows(`SELECT count(*)::text FROM "MannaLedger"`)) as [[string]];
  expect(Number(ledgerRows)).toBeGreaterThan(0);
}
