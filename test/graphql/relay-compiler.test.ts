import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { buildSchema, isObjectType } from 'graphql';
import { afterAll, describe, expect, it } from 'vitest';
import { printedSchema } from '../../src/graphql/print.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { postRaw } from './support.ts';

const require = createRequire(import.meta.url);
/** The compiler's native binary, shipped inside the pinned npm package. */
const relayBinary: string = require('relay-compiler');
const run = promisify(execFile);

const sdl = printedSchema();
/** Every type that implements Node, read from the schema itself so a new node type is compiled too. */
const nodeTypes = Object.values(buildSchema(sdl).getTypeMap())
  .filter((type) => isObjectType(type) && type.getInterfaces().some((i) => i.name === 'Node'))
  .map((type) => type.name)
  .sort();

/** A small Relay app: a refetchable fragment per node type, and paginated lists with @connection. */
const documents = [
  ...nodeTypes.map(
    (type) => `graphql\`fragment App${type}_node on ${type} @refetchable(queryName: "App${type}RefetchQuery") { __typename id }\`;`,
  ),
  `graphql\`fragment AppAgentCard_agent on Agent @refetchable(queryName: "AppAgentCardRefetchQuery") {
    name description public rawId owner { id username }
  }\`;`,
  `graphql\`fragment AppAgents_query on Query
    @refetchable(queryName: "AppAgentsPaginationQuery")
    @argumentDefinitions(count: { type: "Int", defaultValue: 2 }, cursor: { type: "String" }, filter: { type: "AgentFilter" }) {
    agents(first: $count, after: $cursor, filter: $filter) @connection(key: "AppAgents_agents", filters: ["filter"]) {
      edges { node { id ...AppAgentCard_agent } }
    }
  }\`;`,
  `graphql\`fragment AppChat_session on Session
    @refetchable(queryName: "AppChatPaginationQuery")
    @argumentDefinitions(count: { type: "Int", defaultValue: 20 }, cursor: { type: "String" }) {
    title
    messages(last: $count, before: $cursor) @connection(key: "AppChat_messages") {
      edges { node { id content role sender { id username } } }
    }
  }\`;`,
  `graphql\`query AppQuery { me { id username } ...AppAgents_query }\`;`,
].join('\n\n');

let dir: string;
let t: TestApp;
let alice: TestUser;
let bob: TestUser;

setUp(async (start) => {
  dir = await mkdtemp(join(tmpdir(), 'parley-relay-'));
  await mkdir(join(dir, 'src', '__generated__'), { recursive: true });
  await writeFile(join(dir, 'schema.graphql'), sdl);
  await writeFile(join(dir, 'src', 'App.js'), `/* A Relay client's documents. */\n${documents}\n`);
  await writeFile(
    join(dir, 'relay.config.json'),
    JSON.stringify({ src: './src', schema: './schema.graphql', language: 'javascript', artifactDirectory: './src/__generated__' }),
  );
  t = await start.app();
  [alice, bob] = [await t.createUser('alice'), await t.createUser('bob')];
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** A compiled Relay artifact: the operation text Relay would send. */
const artifact = async (name: string) =>
  ((await import(pathToFileURL(join(dir, 'src', '__generated__', `${name}.graphql.js`)).href)) as { default: { params: { text: string } } })
    .default;

describe('relay-compiler', () => {
  it('compiles @refetchable fragments on every node type and @connection lists against the printed schema', async () => {
    expect(nodeTypes).toEqual(
      expect.arrayContaining(['Agent', 'Concept', 'Creation', 'Creator', 'Message', 'Model', 'Session', 'Share', 'Tool']),
    );
    const { stdout, stderr } = await run(relayBinary, ['--output', 'quiet-with-errors'], { cwd: dir });
    expect(stderr + stdout).not.toMatch(/error/i);
    const made = await readdir(join(dir, 'src', '__generated__'));
    for (const type of nodeTypes) {
      expect(made).toContain(`App${type}RefetchQuery.graphql.js`);
      expect((await artifact(`App${type}RefetchQuery`)).params.text).toMatch(/node\(id: \$id\)/);
    }
    expect(made).toEqual(expect.arrayContaining(['AppAgentsPaginationQuery.graphql.js', 'AppChatPaginationQuery.graphql.js']));
  });

  it("refetches through the compiler's own node(id:) queries against a real server, and pages with its connection query", async () => {
    const f = fixtures(t);
    const agents = [];
    for (const name of ['First', 'Second', 'Third']) agents.push(await f.agent(alice, { name: `${name} relay agent`, public: true }));
    const secret = await f.agent(alice, { name: 'Relay secret', public: false });
    const send = async (name: string, variables: Record<string, unknown>, key = alice.apiKey) =>
      postRaw(t, { query: (await artifact(name)).params.text, variables }, key);

    const page = await send('AppAgentsPaginationQuery', { count: 2, filter: { text: 'relay agent' } });
    expect(page.json.errors).toBeUndefined();
    const edges = page.json.data.agents.edges;
    expect(edges.map((e: { node: { name: string } }) => e.node.name)).toEqual(['Third relay agent', 'Second relay agent']);
    const next = await send('AppAgentsPaginationQuery', {
      count: 2,
      cursor: page.json.data.agents.pageInfo.endCursor,
      filter: { text: 'relay agent' },
    });
    expect(next.json.data.agents.edges.map((e: { node: { name: string } }) => e.node.name)).toEqual(['First relay agent']);

    const id = edges[0].node.id;
    const refetched = await send('AppAgentCardRefetchQuery', { id });
    expect(refetched.json.errors).toBeUndefined();
    expect(refetched.json.data.node).toMatchObject({ __typename: 'Agent', id, name: 'Third relay agent', rawId: agents[2]!.id });
    const me = await send('AppCreatorRefetchQuery', { id: refetched.json.data.node.owner.id });
    expect(me.json.data.node).toEqual({ __typename: 'Creator', id: refetched.json.data.node.owner.id });

    const secretId = Buffer.from(`Agent:${secret.id}`).toString('base64');
    expect((await send('AppAgentCardRefetchQuery', { id: secretId })).json.data.node.name).toBe('Relay secret');
    const stranger = await send('AppAgentCardRefetchQuery', { id: secretId }, bob.apiKey);
    expect(stranger.json.data).toEqual({ node: null });
    expect(stranger.json.errors[0].extensions.code).toBe('FORBIDDEN');
    expect(stranger.text).not.toContain('Relay secret');
  });
});
