import { type GraphQLError, getVariableValues, parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { memoryApqStore } from '../../src/graphql/apq.ts';
import { DOCUMENT_LIMITS } from '../../src/graphql/armor.ts';
import { inFlightCounter } from '../../src/graphql/in-flight.ts';
import { schema } from '../../src/graphql/schema.ts';
import { createGraphQLServer } from '../../src/graphql/server.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { documentsSent, type PlaygroundDocument, playgroundDocuments } from '../helpers/playground-documents.ts';
import { setUp } from '../helpers/set-up.ts';
import { searchableCreation } from '../search/support.ts';

/**
 * Every GraphQL document the playground sends, read from its sources (not copied here), checked
 * against the server's own document limits: validated as the server validates (its Yoga, built
 * by `createGraphQLServer` over this app's services, with the armor plugins of src/graphql/armor.ts),
 * its variables given as the page gives them, and run over HTTP against a user's real data. The
 * Triggers panel asked for triggers(first: 50) × runs(first: 5): 54,490 against a limit of 20,000.
 */
let t: TestApp;
let alice: TestUser;
let validateAsServer: (doc: PlaygroundDocument) => readonly GraphQLError[];

setUp(async (start) => {
  // A webhook the page makes points at loopback (nothing answers there): allowed as on a private network.
  t = await start.app({ outbound: { allowHttp: true, allowPrivate: true } });
  alice = await t.createUser('alice');
  await t.services.manna.grant('alice', '50', 'forever');
  await searchableCreation(t, alice, { name: 'A lighthouse at dusk', prompt: 'a lighthouse at dusk' });
  const quiet = { error() {}, warn() {} };
  const yoga = createGraphQLServer(t.services, quiet, {
    persistedQueries: memoryApqStore({ maxEntries: 10, ttlMs: 60_000 }),
    inFlight: inFlightCounter(16),
  });
  validateAsServer = (doc) => {
    const { validate, schema } = yoga.getEnveloped({});
    return validate(schema, doc.document);
  };
});

const documents = playgroundDocuments();
const byName = new Map(documents.map((d) => [d.operation.name!.value, d]));

/** POSTs a document of the page as the page does (`request` in playground/src/api.ts). */
async function send(name: string, variables: Record<string, unknown>) {
  const doc = byName.get(name);
  if (!doc) throw new Error(`the playground has no operation ${name}`);
  const response = await fetch(`${t.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json', 'x-api-key': alice.apiKey },
    body: JSON.stringify({ query: doc.text, variables }),
  });
  const body = (await response.json()) as { data?: any; errors?: { message: string }[] };
  expect(body.errors, `${name}: ${JSON.stringify(body.errors)}`).toBeUndefined();
  return body.data;
}

/**
 * What the page sends with each operation, for the data made below (ids filled in as they are
 * made). An operation of the page missing here fails the test: each one is checked with the
 * variables a person's click gives it.
 */
const ids: Record<string, string> = {};
const realistic: Record<string, () => Record<string, unknown>> = {
  Me: () => ({}),
  Agents: () => ({}),
  CreateAgent: () => ({
    input: { key: `lighthouse-${Math.random().toString(36).slice(2, 8)}`, name: 'Lighthouse keeper', persona: 'Calm' },
  }),
  Sessions: () => ({}),
  Session: () => ({ id: ids.session }),
  Send: () => ({ input: { agentIds: [ids.agent], content: 'Hello there' } }),
  React: () => ({ messageId: ids.message, reaction: '❤️' }),
  Cancel: () => ({ sessionId: ids.session }),
  // Run in Chromium (tool-approvals-browser.test.ts): it needs a reply paused at a call.
  SettleApproval: () => ({ input: { sessionId: ids.session, callId: ids.session, approve: false, reason: 'too pricey today' } }),
  Share: () => ({ id: ids.session }),
  Shared: () => ({ shareId: ids.share }),
  Events: () => ({ sessionId: ids.session, after: 3 }),
  Autonomy: () => ({ id: ids.session }),
  SetAutonomy: () => ({
    id: ids.session,
    input: {
      autonomySettings: { autoReply: false, replyInterval: 5, actorSelectionMethod: 'RANDOM_EXCLUDE_LAST' },
      budget: { turnBudget: 10 },
    },
  }),
  AutonomyStops: () => ({ sessionId: ids.session }),
  TaskTools: () => ({}),
  MyTasks: () => ({}),
  TaskBalance: () => ({}),
  EstimateTaskCost: () => ({ tool: 'flux_schnell', args: { prompt: 'a kite', n_samples: 1 } }),
  CreateTask: () => ({ tool: 'flux_schnell', args: { prompt: 'a kite', n_samples: 1 } }),
  CancelTask: () => ({ taskId: ids.task }),
  TaskUpdates: () => ({ after: 1 }),
  SearchForCollection: () => ({ query: 'lighthouse' }),
  MyCollections: () => ({}),
  CreateCollection: () => ({ input: { name: 'Seaside', creationIds: [ids.creation] } }),
  AddToCollection: () => ({ id: ids.collection, creationIds: [ids.creation] }),
  SetCollectionVisibility: () => ({ id: ids.collection, input: { public: false } }),
  AgentDeployments: () => ({ id: ids.agent }),
  DeployToTelegram: () => ({ agentId: ids.agent, input: { platform: 'TELEGRAM', secrets: { telegram: { token: '123456789:AAbbcc' } } } }),
  StopTelegram: () => ({ agentId: ids.agent }),
  DeleteTelegram: () => ({ agentId: ids.agent }),
  DeploymentUpdates: () => ({ agentId: ids.agentRaw, after: 1 }),
  AgentTriggers: () => ({ id: ids.agent, after: null }),
  CreateTrigger: () => ({
    agentId: ids.agent,
    input: { name: 'Mornings', prompt: 'Say good morning', schedule: { second: '0', minute: '0', hour: '9', timezone: 'Europe/Paris' } },
  }),
  UpdateTrigger: () => ({ id: ids.trigger, input: { status: 'PAUSED' } }),
  RunTrigger: () => ({ id: ids.trigger }),
  DeleteTrigger: () => ({ id: ids.trigger }),
  AgentApprovals: () => ({ id: ids.agent }),
  SetApprovals: () => ({ id: ids.agent, input: { toolApproval: { rules: [], timeoutSeconds: 120 } } }),
  MyWebhooks: () => ({}),
  CreateWebhook: () => ({ input: { url: 'http://127.0.0.1:9/hook', eventTypes: ['WEBHOOK_TEST', 'TASK_FAILED'] } }),
  SetWebhookEnabled: () => ({ id: ids.webhook, input: { enabled: false } }),
  TestWebhook: () => ({ id: ids.webhook }),
  RotateWebhook: () => ({ id: ids.webhook }),
  RedeliverWebhook: () => ({ id: ids.webhook, deliveryId: ids.delivery }),
  DeleteWebhook: () => ({ id: ids.webhook }),
  MyMcpServers: () => ({}),
  // Asks the server for its tools: run in Chromium (panels-browser.test.ts) against a loopback MCP server.
  McpServerTools: () => ({ id: ids.mcpServer }),
  CreateMcpServer: () => ({
    input: {
      name: 'search',
      url: 'http://127.0.0.1:9/mcp',
      headers: [
        { name: 'x-team', value: 'blue' },
        { name: 'authorization', value: 'Bearer queries-3b1f' },
      ],
      pricePerCall: 2,
    },
  }),
  DeleteMcpServer: () => ({ id: ids.mcpServer }),
  MyAgents: () => ({}),
  AgentMcpTools: () => ({ id: ids.agent }),
  SetAgentMcpTools: () => ({ id: ids.agent, input: { mcpTools: [{ serverId: ids.mcpServer, tool: 'search' }] } }),
};

describe("the playground's GraphQL documents", () => {
  it('are read from its sources, and every document the page sends is among them', () => {
    expect(documents.length).toBeGreaterThanOrEqual(35);
    const found = new Set(documents.map((d) => `${d.file}:${d.constant}`));
    const sent = documentsSent();
    expect(sent.length).toBeGreaterThanOrEqual(30);
    expect(sent.filter((s) => !found.has(`${s.file}:${s.constant}`))).toEqual([]);
    // Each has a name, and one name means one document: the table below gives each its variables.
    expect(new Set(documents.map((d) => d.operation.name?.value)).size).toBe(documents.length);
    expect(documents.map((d) => d.operation.name!.value).filter((name) => !realistic[name])).toEqual([]);
  });

  it("each passes the server's own validation, its cost, depth, alias and token limits included", () => {
    const refused = documents.flatMap((doc) =>
      validateAsServer(doc).map((e) => `${doc.file} ${doc.operation.name!.value}: ${e.message} (${e.extensions.code ?? 'INVALID'})`),
    );
    expect(refused).toEqual([]);
    // The check is live: what the Triggers panel used to ask (50 triggers × 5 runs each) is refused by it.
    const before = byName.get('AgentTriggers')!;
    const old = parse(before.text.replace('first: 20', 'first: 50').replace('runs(first: 3)', 'runs(first: 5)'));
    expect(validateAsServer({ ...before, document: old }).map((e) => e.extensions.code)).toEqual(['COST_LIMIT_EXCEEDED']);
    expect(DOCUMENT_LIMITS.cost).toBe(20_000);
  });

  it('each takes the variables the page gives it', () => {
    for (const name of [
      'session',
      'message',
      'task',
      'collection',
      'creation',
      'trigger',
      'agent',
      'agentRaw',
      'share',
      'webhook',
      'delivery',
      'mcpServer',
    ])
      ids[name] ??= 'placeholder';
    const problems = documents.flatMap((doc) => {
      const { errors } = getVariableValues(schema, doc.operation.variableDefinitions ?? [], realistic[doc.operation.name!.value]!());
      return (errors ?? []).map((e) => `${doc.operation.name!.value}: ${e.message}`);
    });
    expect(problems).toEqual([]);
  });

  it('each query and mutation a person can run without outside services runs with no error against real data', async () => {
    const run = (name: string) => send(name, realistic[name]!());
    const agent = (await run('CreateAgent')).createAgent;
    ids.agent = agent.id;
    const sent = (await run('Send')).sendMessage;
    ids.session = sent.session.id;
    ids.message = sent.promptId;
    await run('React');
    ids.share = (await run('Share')).shareSession.shareId;
    await run('SetAutonomy');
    ids.trigger = (await run('CreateTrigger')).createTrigger.id;
    await run('RunTrigger');
    await run('UpdateTrigger');
    const task = (await run('CreateTask')).createTask;
    ids.task = task.id;
    await run('CancelTask');
    const found = (await run('SearchForCollection')).searchCreations.docs;
    expect(found.length).toBeGreaterThan(0);
    ids.creation = found[0].id;
    ids.collection = (await run('CreateCollection')).createCollection.id;
    await run('AddToCollection');
    if (byName.has('SetCollectionVisibility')) await run('SetCollectionVisibility');
    const deployments = (await run('AgentDeployments')).agent;
    ids.agentRaw = deployments.rawId;
    for (const name of [
      'Me',
      'Agents',
      'Sessions',
      'Session',
      'Shared',
      'Autonomy',
      'TaskTools',
      'MyTasks',
      'TaskBalance',
      'EstimateTaskCost',
    ]) {
      await run(name);
    }
    expect((await run('MyCollections')).me.collections.edges).toHaveLength(1);
    const triggers = (await run('AgentTriggers')).agent.triggers;
    expect(triggers.edges[0].node.runs.edges.length).toBeGreaterThan(0);
    await run('Cancel');
    await run('DeleteTrigger');
    await run('SetApprovals');
    expect((await run('AgentApprovals')).agent.toolApproval).toEqual({ rules: [], timeoutSeconds: 120 });
    ids.webhook = (await run('CreateWebhook')).createWebhook.webhook.id;
    ids.delivery = (await run('TestWebhook')).testWebhook.rawId;
    await run('RedeliverWebhook');
    expect((await run('MyWebhooks')).me.webhooks[0].deliveries.length).toBeGreaterThan(0);
    await run('RotateWebhook');
    await run('SetWebhookEnabled');
    await run('DeleteWebhook');
    ids.mcpServer = (await run('CreateMcpServer')).createMcpServer.id;
    expect((await run('MyMcpServers')).me.mcpServers).toEqual([
      expect.objectContaining({ name: 'search', pricePerCall: 2, hasAuthorization: true, headers: [{ name: 'x-team', value: 'blue' }] }),
    ]);
    expect((await run('MyAgents')).me.agents.edges.map((e: { node: { id: string } }) => e.node.id)).toContain(ids.agent);
    await run('SetAgentMcpTools');
    expect((await run('AgentMcpTools')).agent.mcpTools).toEqual([{ server: { id: ids.mcpServer }, tool: 'search' }]);
    await run('DeleteMcpServer');
  });
});
