import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { DatabaseConfig } from '../../src/config.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { freshDatabase, onRealPostgres } from '../helpers/database.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { until } from '../helpers/until.ts';

/**
 * Media links follow the service, not the address it had when they were made: one app (on its
 * own port) makes images in a reply and in a task, a search tool finds them, a collection holds
 * them; then it stops, and a second app serves the same database and media folder on another
 * port. Everywhere a link is shown there, REST and GraphQL, it is the second app's, and it
 * answers with the file's bytes; the database holds them relative to the service.
 */
let first: TestApp;
let second: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;
let mediaDir: string;
let made: { creationId: string; taskId: string; sessionId: string; collectionId: string; firstUrl: string; toldModel: string };

/** One database two apps open in turn: a new one on PostgreSQL, or an embedded data directory. */
async function sharedDatabase(): Promise<{ config: DatabaseConfig; drop(): Promise<void> }> {
  if (onRealPostgres()) return freshDatabase();
  const dataDir = await mkdtemp(join(tmpdir(), 'parley-links-'));
  return { config: { kind: 'pglite', dataDir }, drop: () => rm(dataDir, { recursive: true, force: true }) };
}

const call = (id: string, name: string, args: unknown) => ({ id, name, arguments: JSON.stringify(args) });

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Done.'] });
  const db = await start.service(sharedDatabase(), (d) => d.drop());
  mediaDir = await start.service(mkdtemp(join(tmpdir(), 'parley-links-media-')), (dir) => rm(dir, { recursive: true, force: true }));
  first = await start.app({ llm: { baseUrl: llm.baseUrl }, mediaDir }, db.config);
  alice = await first.createUser('alice');
  await first.services.manna.grant('alice', '50', 'forever');
  const muse = await fixtures(first).agent(alice, { name: 'Muse', key: 'muse', tools: { flux_dev: true, creations_search: true } });
  llm.enqueue(
    { tokens: ['Painting.'], toolCalls: [call('call_paint', 'flux_dev', { prompt: 'a heron by a canal lock' })] },
    { tokens: ['Looking.'], toolCalls: [call('call_find', 'creations_search', { query: 'heron canal lock' })] },
    { tokens: ['Here it is.'] },
  );
  const reply = await first.rest('POST', '/v2/sessions', {
    key: alice.apiKey,
    body: { agent_ids: [muse.id], content: 'Paint me a heron, then find it' },
  });
  expect(reply.status).toBe(200);
  const sessionId = reply.body.session_id as string;
  const calls = async () =>
    (await first.db.task.findMany({ where: { sessionId, status: 'completed' }, orderBy: { position: 'asc' } })).map((c) => c.result);
  const [painted] = (await until('both tool calls to complete', async () => ((await calls()).length === 2 ? calls() : null))) as [
    { images: { creationId: string }[] },
  ];
  const creationId = painted.images[0]!.creationId;

  const task = await first.rest('POST', '/v2/tasks/create', { key: alice.apiKey, body: { tool: 'flux_dev', args: { prompt: 'a barge' } } });
  expect(task.status).toBe(200);
  const taskId = task.body.task._id as string;
  await until(
    'the task to complete',
    async () => (await first.rest('GET', `/v2/tasks/${taskId}`, { key: alice.apiKey })).body.task.status === 'completed',
  );
  const collection = await first.rest('POST', '/v2/collections', { key: alice.apiKey, body: { name: 'Birds', creationIds: [creationId] } });
  expect(collection.status).toBe(201);
  const shown = await first.rest('GET', `/v2/creations/${creationId}`, { key: alice.apiKey });
  const toldModel = llm.replyRequests()[1]!.body.messages.at(-1)!.content as string;
  made = { creationId, taskId, sessionId, collectionId: collection.body.collectionId, firstUrl: shown.body.creation.url, toldModel };
  await first.close();
  second = await start.app({ mediaDir }, db.config);
});

async function graphql(query: string, variables: Record<string, unknown>) {
  const res = await second.rest('POST', '/graphql', { key: alice.apiKey, body: { query, variables } });
  expect(res.body.errors, JSON.stringify(res.body.errors)).toBeUndefined();
  return res.body.data;
}

/** Every string in `value` that is a link to media, also inside JSON given as text (a thread's tool metadata). */
function mediaLinksIn(value: unknown): string[] {
  if (typeof value === 'string' && /^[[{]/.test(value)) return mediaLinksIn(JSON.parse(value));
  if (typeof value === 'string') return /\/media\//.test(value) ? [value] : [];
  if (Array.isArray(value)) return value.flatMap(mediaLinksIn);
  if (value && typeof value === 'object') return Object.values(value).flatMap(mediaLinksIn);
  return [];
}

it('the first app told the model, and showed, links to itself', () => {
  expect(made.firstUrl).toMatch(new RegExp(`^${first.url}/media/[\\w-]+\\.png$`));
  expect(mediaLinksIn(JSON.parse(made.toldModel)).every((l) => l.startsWith(`${first.url}/media/`))).toBe(true);
});

it('the database holds every link of its own relative to the service', async () => {
  const creations = await second.db.creation.findMany({ select: { url: true, thumbnail: true } });
  expect(creations.length).toBe(2);
  for (const c of creations) {
    expect(c.url).toMatch(/^\/media\/[\w-]+\.png$/);
    expect(c.thumbnail).toMatch(/^\/media\/[\w-]+-thumb\.png$/);
  }
  const results = (await second.db.task.findMany({ select: { result: true } })).map((t) => t.result);
  expect(mediaLinksIn(results).length).toBeGreaterThanOrEqual(3);
  expect(mediaLinksIn(results).every((l) => l.startsWith('/media/'))).toBe(true);
});

it('every link the second app shows, REST and GraphQL, is its own and answers with the file', async () => {
  const { creationId, taskId, sessionId, collectionId } = made;
  const key = { key: alice.apiKey };
  const rest = await Promise.all(
    [
      `/v2/creations/${creationId}`,
      `/v2/tasks/${taskId}`,
      '/v2/tasks?limit=10',
      '/v2/creations/search?query=heron%20canal%20lock',
      `/v2/collections/${collectionId}`,
      `/v2/collections/${collectionId}/creations`,
      `/v2/sessions/${sessionId}`,
      `/v2/threads/${sessionId}`,
    ].map(async (path) => {
      const res = await second.rest('GET', path, key);
      expect(res.status, path).toBe(200);
      return [path, res.body] as const;
    }),
  );
  const gql = await graphql(
    `query($creation: ID!, $task: ID!, $session: ID!, $collection: ID!) {
      creation(id: $creation) { url thumbnail }
      task(id: $task) { result }
      session(id: $session) { messages(first: 10) { edges { node { toolCalls { result } } } } }
      collection(id: $collection) { cover { url thumbnail } creations(first: 5) { edges { node { url } } } }
      searchCreations(query: "heron canal lock") { docs { url thumbnail } }
    }`,
    { creation: creationId, task: taskId, session: sessionId, collection: collectionId },
  );
  const shown: [string, string[]][] = [
    ...rest.map(([path, body]) => [path, mediaLinksIn(body)] as [string, string[]]),
    ['graphql', mediaLinksIn(gql)],
  ];
  for (const [where, links] of shown) {
    expect(links.length, where).toBeGreaterThan(0);
    for (const link of links) expect(link, where).toMatch(new RegExp(`^${second.url}/media/[\\w-]+\\.png$`));
  }
  expect(second.url).not.toBe(first.url);
  for (const link of new Set(shown.flatMap(([, links]) => links))) {
    expect(new URL(link).origin).toBe(second.url);
    const res = await fetch(link);
    expect(res.status, link).toBe(200);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(await readFile(join(mediaDir, new URL(link).pathname.slice('/media/'.length))));
  }
});
