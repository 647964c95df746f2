import { PNG } from 'pngjs';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MEMORY_CAP } from '../../src/domain/memories/service.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { isMemoryRequest, type FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { newSession, settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError } from './support.ts';

const CreateTask = graphql(`
  mutation CreateTask($tool: String!, $args: JSON, $makePublic: Boolean) {
    createTask(tool: $tool, args: $args, makePublic: $makePublic) {
      id rawId toolKey outputType status progress cost public args owner { username }
    }
  }
`);
const Estimate = graphql(`
  query EstimateTaskCost($tool: String!, $args: JSON) { estimateTaskCost(tool: $tool, args: $args) }
`);
const OneTask = graphql(`
  query OneTask($id: ID!) {
    task(id: $id) { id rawId status progress result error cost outputs { rawId url task { rawId } } }
  }
`);
const TaskNode = graphql(`
  query TaskNode($id: ID!) { node(id: $id) { __typename ... on Task { rawId status } } }
`);
const Tasks = graphql(`
  query Tasks($filter: TaskFilter, $first: Int, $after: String) {
    tasks(filter: $filter, first: $first, after: $after) {
      edges { cursor node { rawId toolKey status sessionId messageId agent { key } truncated } }
      pageInfo { hasNextPage endCursor }
    }
  }
`);
const CancelTask = graphql(`
  mutation CancelTask($taskId: ID!) { cancelTask(taskId: $taskId) { rawId status error } }
`);
const CreationTask = graphql(`
  query CreationTask($id: ID!) { creation(id: $id) { rawId task { rawId toolKey } } }
`);

const Stream = graphql(`
  subscription ToolStream($input: SendMessageInput!) {
    sendMessage(input: $input) {
      __typename
      ... on AssistantMessage { message { id status content toolCalls { id tool status cost args result error } } }
      ... on ToolCompleted { toolCall { id tool status cost result } }
      ... on AssistantToken { text }
    }
  }
`);
const Ledger = graphql(`
  query Ledger($first: Int, $after: String) {
    me { balance ledger(first: $first, after: $after) { edges { node { amount kind balanceAfter reason sessionId toolCallId taskId } } pageInfo { hasNextPage endCursor } } }
  }
`);
const MyCreations = graphql(`
  query ToolCreations {
    me { creations(first: 5) { edges { node { id toolKey url mediaAttributes agent { key } } } } }
  }
`);
const Memories = graphql(`
  query Memories($id: ID!) {
    agent(id: $id) { memories { id fact sessionId } }
  }
`);
const Forget = graphql(`
  mutation Forget($agentId: ID!, $memoryId: ID) {
    forgetMemory(agentId: $agentId, memoryId: $memoryId)
  }
`);
const Send = graphql(`
  mutation SendForMemory($input: SendMessageInput!) {
    sendMessage(input: $input) { session { rawId } }
  }
`);

let t: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;
let bob: TestUser;
const ws = graphqlWsClients(() => t.url);
afterAll(async () => {
  await ws.disposeAll();
});

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Done.'] });
  t = await start.app({ llm: { baseUrl: llm.baseUrl } });
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
  await t.services.manna.grant('alice', '20', 'forever');
});

async function settled(id: string, key = alice.apiKey) {
  for (;;) {
    const task = expectData(await t.gql(OneTask, { id }, key)).task;
    if (['COMPLETED', 'FAILED', 'CANCELLED'].includes(task.status)) return task;
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('tasks over GraphQL', () => {
  it('estimateTaskCost, createTask, then task and node as it completes; its creations name it back', async () => {
    const args = { prompt: 'a harbour at dawn', n_samples: 2 };
    const cost = expectData(await t.gql(Estimate, { tool: 'flux_schnell', args }, alice.apiKey)).estimateTaskCost;
    expect(cost).toBe(0.5);
    const made = expectData(await t.gql(CreateTask, { tool: 'flux_schnell', args }, alice.apiKey)).createTask;
    expect(made).toMatchObject({
      toolKey: 'flux_schnell',
      outputType: 'IMAGE',
      status: 'PENDING',
      progress: 0,
      cost,
      public: false,
      args,
      owner: { username: 'alice' },
    });
    const done = await settled(made.id);
    expect(done).toMatchObject({ rawId: made.rawId, status: 'COMPLETED', progress: 1, error: null, cost });
    expect(done.outputs).toHaveLength(2);
    expect(done.outputs.every((o) => o.task?.rawId === made.rawId)).toBe(true);
    expect(expectData(await t.gql(TaskNode, { id: made.id }, alice.apiKey)).node).toEqual({
      __typename: 'Task',
      rawId: made.rawId,
      status: 'COMPLETED',
    });
    expect(expectData(await t.gql(CreationTask, { id: done.outputs[0]!.rawId }, alice.apiKey)).creation.task).toEqual({
      rawId: made.rawId,
      toolKey: 'flux_schnell',
    });
  });

  it("another user's private task is NOT_FOUND, and a creation made public by its owner does not show its private task", async () => {
    const made = expectData(await t.gql(CreateTask, { tool: 'flux_schnell', args: { prompt: 'private' } }, alice.apiKey)).createTask;
    const done = await settled(made.id);
    expectGraphQLError(await t.gql(OneTask, { id: made.id }, bob.apiKey), 'NOT_FOUND');
    await t.db.creation.update({ where: { id: done.outputs[0]!.rawId }, data: { public: true } });
    expect(expectData(await t.gql(CreationTask, { id: done.outputs[0]!.rawId }, bob.apiKey)).creation.task).toBeNull();
  });

  it('createTask refuses what the balance cannot cover (INSUFFICIENT_MANNA) and bad input (BAD_USER_INPUT naming the field), creating nothing', async () => {
    const before = await t.db.task.count();
    const broke = expectGraphQLError(
      await t.gql(CreateTask, { tool: 'flux_dev', args: { prompt: 'x' } }, bob.apiKey),
      'INSUFFICIENT_MANNA',
    );
    expect(broke.message).toBe('Insufficient manna balance. Need 1 but only have 0');
    const bad = expectGraphQLError(
      await t.gql(CreateTask, { tool: 'flux_dev', args: { prompt: 'x', n_samples: 0 } }, alice.apiKey),
      'BAD_USER_INPUT',
    );
    expect(bad.extensions?.field).toBe('args.n_samples');
    expectGraphQLError(await t.gql(CreateTask, { tool: 'nope' }, alice.apiKey), 'BAD_USER_INPUT');
    expect(await t.db.task.count()).toBe(before);
  });

  it('tasks: a connection with the filters, the tool calls of replies among them', async () => {
    const carol = await t.createUser('carol');
    await t.services.manna.grant('carol', '10', 'forever');
    const agent = await fixtures(t).agent(carol, { key: 'painter', tools: { flux_schnell: true } });
    llm.enqueue(
      { toolCalls: [{ id: 'c1', name: 'flux_schnell', arguments: JSON.stringify({ prompt: 'from a reply' }) }] },
      { tokens: ['Made.'] },
    );
    const sent = await t.rest('POST', '/v2/sessions', { key: carol.apiKey, body: { agent_ids: [agent.id], content: 'paint' } });
    await settledSession(t, carol, sent.body.session_id);
    const ids: string[] = [];
    for (const prompt of ['one', 'two']) {
      const made = expectData(await t.gql(CreateTask, { tool: 'flux_schnell', args: { prompt } }, carol.apiKey)).createTask;
      await settled(made.id, carol.apiKey);
      ids.push(made.rawId);
    }
    const all = expectData(await t.gql(Tasks, {}, carol.apiKey)).tasks;
    expect(all.edges.map((e) => e.node.rawId).slice(0, 2)).toEqual([...ids].reverse());
    expect(all.edges[2]!.node).toMatchObject({ toolKey: 'flux_schnell', agent: { key: 'painter' }, sessionId: expect.any(String) });

    // Pages forward with cursors, in the same order.
    const first = expectData(await t.gql(Tasks, { first: 2 }, carol.apiKey)).tasks;
    expect(first.pageInfo.hasNextPage).toBe(true);
    const rest = expectData(await t.gql(Tasks, { first: 2, after: first.pageInfo.endCursor }, carol.apiKey)).tasks;
    expect([...first.edges, ...rest.edges].map((e) => e.node.rawId)).toEqual(all.edges.map((e) => e.node.rawId));
    expect(rest.pageInfo.hasNextPage).toBe(false);

    const oldestFirst = expectData(await t.gql(Tasks, { filter: { direction: 'ASC' } }, carol.apiKey)).tasks;
    expect(oldestFirst.edges.map((e) => e.node.rawId)).toEqual(all.edges.map((e) => e.node.rawId).reverse());
    const inSession = expectData(await t.gql(Tasks, { filter: { sessionId: sent.body.session_id } }, carol.apiKey)).tasks;
    expect(inSession.edges).toHaveLength(1);
    const picked = expectData(await t.gql(Tasks, { filter: { taskIds: [ids[0]!], status: ['COMPLETED'] } }, carol.apiKey)).tasks;
    expect(picked.edges.map((e) => e.node.rawId)).toEqual([ids[0]]);
    expect(expectData(await t.gql(Tasks, { filter: { outputType: 'AUDIO' } }, carol.apiKey)).tasks.edges).toEqual([]);
    expect(expectData(await t.gql(Tasks, { filter: { type: 'CONCEPTS' } }, carol.apiKey)).tasks.edges).toEqual([]);
    expectGraphQLError(await t.gql(Tasks, { first: 101 }, carol.apiKey), 'BAD_USER_INPUT');
    expectGraphQLError(await t.gql(Tasks, { after: 'not-a-cursor' }, carol.apiKey), 'BAD_USER_INPUT');
  });

  it('cancelTask cancels a task still waiting and returns it; an ended task is left as it is', async () => {
    const dave = await t.createUser('dave');
    await t.services.manna.grant('dave', '10', 'forever');
    // Five tasks for four turns: at least one is still pending when it is cancelled.
    const made = [];
    for (let i = 0; i < 5; i++)
      made.push(
        expectData(await t.gql(CreateTask, { tool: 'flux_schnell', args: { prompt: `n${i}`, n_samples: 4 } }, dave.apiKey)).createTask,
      );
    const last = made.at(-1)!;
    const cancelled = expectData(await t.gql(CancelTask, { taskId: last.id }, dave.apiKey)).cancelTask;
    expect(cancelled).toMatchObject({ rawId: last.rawId });
    expect(['CANCELLED', 'COMPLETED']).toContain(cancelled.status);
    for (const m of made) await settled(m.id, dave.apiKey);
    const again = expectData(await t.gql(CancelTask, { taskId: made[0]!.rawId }, dave.apiKey)).cancelTask;
    expect(again.status).toBe('COMPLETED');
    expectGraphQLError(await t.gql(CancelTask, { taskId: made[0]!.id }, bob.apiKey), 'NOT_FOUND');
    const user = await t.db.user.findUniqueOrThrow({ where: { id: dave.id } });
    const ledger = await t.db.mannaLedger.aggregate({ where: { userId: dave.id }, _sum: { amount: true } });
    expect(ledger._sum.amount!.toNumber()).toBe(user.foreverBalance.toNumber());
  });
});

// Replies at work: their tool calls (tasks too, as the tasks' list shows) and what they remember.
describe('replies', () => {
  // Users of their own: the tasks' tests above count what theirs hold and spend.
  let alice: TestUser;
  let muse: { id: string };
  beforeAll(async () => {
    alice = await t.createUser('alma');
    await t.services.manna.grant('alma', '20', 'forever');
    muse = await fixtures(t).agent(alice, { name: 'Muse', key: 'muse', tools: { flux_schnell: true } });
  });
  beforeEach(() => llm.reset());
  afterEach(() => ws.disposeAll());

  describe('tools over graphql-ws', () => {
    it('streams the tool call, its completion and the final message as typed events; the image is a creation of the user at the asked size', async () => {
      llm.enqueue(
        {
          toolCalls: [
            {
              id: 'c1',
              name: 'flux_schnell',
              arguments: JSON.stringify({ prompt: 'a tram on a foggy bridge', n_samples: 2, resolution: '1344x768' }),
            },
          ],
        },
        { tokens: ['Two', ' versions.'] },
      );
      const sub = wsSubscribe(ws.connect(alice.apiKey), Stream, {
        input: { agentIds: [muse.id], content: 'Two quick sketches of a tram on a foggy bridge' },
      });
      const events = (await sub.ended).map((r) => r.data!.sendMessage);
      expect(events.map((e) => e.__typename)).toEqual([
        'PromptStarted',
        'AssistantMessage',
        // The painter's progress, one image at a time, live as the call runs.
        'ToolProgress',
        'ToolProgress',
        'ToolCompleted',
        'AssistantToken',
        'AssistantToken',
        'AssistantMessage',
        'PromptEnded',
      ]);
      const asking = events[1] as Extract<(typeof events)[number], { __typename: 'AssistantMessage' }>;
      expect(asking.message.toolCalls).toEqual([
        {
          id: expect.any(String),
          tool: 'flux_schnell',
          status: 'PENDING',
          cost: null,
          args: { prompt: 'a tram on a foggy bridge', n_samples: 2, resolution: '1344x768' },
          result: null,
          error: null,
        },
      ]);
      const done = events[4] as Extract<(typeof events)[number], { __typename: 'ToolCompleted' }>;
      expect(done.toolCall).toMatchObject({ tool: 'flux_schnell', status: 'COMPLETED', cost: 0.5 });
      const images = (done.toolCall.result as { images: { url: string; width: number; height: number }[] }).images;
      expect(images.map((i) => [i.width, i.height])).toEqual([
        [1344, 768],
        [1344, 768],
      ]);
      const png = PNG.sync.read(Buffer.from(await (await fetch(images[1]!.url)).arrayBuffer()));
      expect([png.width, png.height]).toEqual([1344, 768]);
      const final = events[7] as Extract<(typeof events)[number], { __typename: 'AssistantMessage' }>;
      expect(final.message).toMatchObject({
        status: 'COMPLETE',
        content: 'Two versions.',
        toolCalls: [{ status: 'COMPLETED', cost: 0.5 }],
      });

      const creations = expectData(await t.gql(MyCreations, {}, alice.apiKey)).me.creations.edges.map((e) => e.node);
      expect(creations.filter((c) => c.toolKey === 'flux_schnell').map((c) => [c.url, c.agent?.key, c.mediaAttributes])).toEqual(
        expect.arrayContaining(images.map((i) => [i.url, 'muse', { mimeType: 'image/png', width: 1344, height: 768, aspectRatio: 1.75 }])),
      );
    });

    it('me.ledger shows where manna went, newest first, page by page', async () => {
      const page1 = expectData(await t.gql(Ledger, { first: 1 }, alice.apiKey)).me;
      expect(page1.balance).toBe(19.5);
      expect(page1.ledger!.edges.map((e) => e.node)).toEqual([
        {
          amount: -0.5,
          kind: 'FOREVER',
          balanceAfter: 19.5,
          reason: 'tool: flux_schnell',
          sessionId: expect.any(String),
          toolCallId: expect.any(String),
          taskId: expect.any(String),
        },
      ]);
      // Ids are global, as sessionId is: the task is found by node(id:), and its rawId is the tool call's.
      const entry = page1.ledger!.edges[0]!.node;
      const found = await fetch(`${t.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': alice.apiKey },
        body: JSON.stringify({
          query: 'query($id: ID!) { node(id: $id) { __typename ... on Task { rawId toolKey } } }',
          variables: { id: entry.taskId },
        }),
      }).then((r) => r.json());
      expect(found).toEqual({ data: { node: { __typename: 'Task', rawId: entry.toolCallId, toolKey: 'flux_schnell' } } });
      const page2 = expectData(await t.gql(Ledger, { first: 5, after: page1.ledger!.pageInfo.endCursor }, alice.apiKey)).me.ledger!;
      expect(page2.edges.map((e) => [e.node.amount, e.node.reason])).toEqual([[20, 'grant']]);
      expect(page2.pageInfo.hasNextPage).toBe(false);
      expectGraphQLError(await t.gql(Ledger, { after: 'not-a-cursor' }, alice.apiKey), 'BAD_USER_INPUT');
    });
  });

  describe('memory', () => {
    it('a fact from one session reaches the model in the next session with that user; an excluded exchange leaves nothing', async () => {
      llm.setMemories(['Their name is Zoe', 'Prefers warm colours']);
      const first = expectData(
        await t.gql(Send, { input: { agentIds: [muse.id], content: 'Hi! My name is Zoe and I prefer warm colours.' } }, alice.apiKey),
      ).sendMessage.session.rawId;
      await settledSession(t, alice, first);
      await expect
        .poll(async () =>
          expectData(await t.gql(Memories, { id: muse.id }, alice.apiKey))
            .agent.memories.map((m) => m.fact)
            .sort(),
        )
        .toEqual(['Prefers warm colours', 'Their name is Zoe']);
      const extraction = llm.requests.find(isMemoryRequest)!;
      expect(extraction.body.messages[1]!.content).toContain('My name is Zoe');

      llm.reset();
      llm.setMemories(['Their name is Zoe']);
      const second = expectData(await t.gql(Send, { input: { agentIds: [muse.id], content: 'What should I paint today?' } }, alice.apiKey))
        .sendMessage.session.rawId;
      await settledSession(t, alice, second);
      const system = llm.replyRequests()[0]!.body.messages[0]!.content!;
      expect(system).toContain('What you remember about the person you are answering:');
      expect(system).toContain('- Their name is Zoe');
      expect(system).toContain('- Prefers warm colours');
      // The same fact again is kept once.
      await expect.poll(async () => expectData(await t.gql(Memories, { id: muse.id }, alice.apiKey)).agent.memories).toHaveLength(2);
      // This exchange's own extraction must have been asked before the fake is told to answer a secret,
      // or it could be the one to learn it.
      await expect
        .poll(() => llm.requests.some((r) => isMemoryRequest(r) && r.body.messages[1]?.content?.includes('What should I paint today')))
        .toBe(true);

      llm.reset();
      llm.setMemories(['Has a secret project']);
      const private_ = await t.rest('POST', '/v2/sessions', {
        key: alice.apiKey,
        body: { agent_ids: [muse.id], content: 'Between us: I have a secret project.', extras: { exclude_memory: true } },
      });
      await settledSession(t, alice, private_.body.session_id);
      const extractions = llm.requests.filter(isMemoryRequest);
      expect(extractions.some((r) => r.body.messages[1]?.content?.includes('secret project'))).toBe(false);
      expect(llm.replyRequests()[0]!.body.messages[0]!.content).not.toContain('Their name is Zoe');
      const facts = (await t.rest('GET', `/v2/agents/${muse.id}/memories`, { key: alice.apiKey })).body.memories.map(
        (m: { fact: string }) => m.fact,
      );
      expect(facts).not.toContain('Has a secret project');
    });

    it(`keeps the newest ${MEMORY_CAP} facts an agent learnt about a user, each once`, async () => {
      const cara = await t.createUser('cara');
      const sessionId = await newSession(t, cara, [muse.id]);
      for (let round = 1; round <= 26; round++) {
        // Each exchange teaches two new facts, one of them said twice.
        llm.setMemories([`Fact ${round}.a`, `Fact ${round}.b`, `fact ${round}.A!`]);
        await t.services.memories.host.remember({ agentId: muse.id, userId: cara.id, sessionId, prompt: 'tell', reply: 'noted' });
      }
      const kept = await t.services.memories.list({ id: cara.id }, muse.id);
      expect(kept).toHaveLength(MEMORY_CAP);
      expect(new Set(kept.map((m) => m.fact)).size).toBe(MEMORY_CAP);
      // The first exchange's facts were the oldest: they went.
      expect(kept.filter((m) => m.fact.startsWith('Fact 1.'))).toEqual([]);
      expect(kept[0]!.fact).toMatch(/^Fact 26\./);
    });

    it('prompts to new sessions that arrive together read their agent in one statement, each with its own user’s memories', async () => {
      const [dora, eli] = [await t.createUser('dora'), await t.createUser('eli')];
      await t.db.memory.createMany({
        data: [
          { agentId: muse.id, userId: dora.id, fact: 'Dora keeps bees', key: 'dora keeps bees' },
          { agentId: muse.id, userId: eli.id, fact: 'Eli sails', key: 'eli sails' },
        ],
      });
      const viewers = await Promise.all([dora, eli, dora, eli].map((u) => t.services.apiKeys.authenticate(u.apiKey)));
      llm.reset();
      const before = t.queries.length;
      const sent = await Promise.all(viewers.map((v, i) => t.services.sessions.send(v, { agentIds: [muse.id], content: `hello ${i}` })));
      expect(t.queries.slice(before).filter((q) => q.includes('FROM "public"."Agent"'))).toHaveLength(1);
      for (const [i, s] of sent.entries()) await settledSession(t, i % 2 ? eli : dora, s.sessionId);
      for (const i of sent.keys()) {
        const system = llm.replyRequests().find((r) => r.body.messages.at(-1)?.content === `hello ${i}`)!.body.messages[0]!.content!;
        const [own, other] = i % 2 ? ['Eli sails', 'Dora keeps bees'] : ['Dora keeps bees', 'Eli sails'];
        expect(system).toContain(own);
        expect(system).not.toContain(other);
      }
    });

    it('memories are per user: another user sees none of them and cannot forget them; forgetting one or all works', async () => {
      const bob = await t.createUser('bert');
      expect(expectData(await t.gql(Memories, { id: muse.id }, bob.apiKey)).agent.memories).toEqual([]);
      const mine = expectData(await t.gql(Memories, { id: muse.id }, alice.apiKey)).agent.memories;
      expect(mine.length).toBeGreaterThan(1);
      expectGraphQLError(await t.gql(Forget, { agentId: muse.id, memoryId: mine[0]!.id }, bob.apiKey), 'NOT_FOUND');
      expect(expectData(await t.gql(Forget, { agentId: muse.id, memoryId: mine[0]!.id }, alice.apiKey)).forgetMemory).toBe(1);
      expect(expectData(await t.gql(Memories, { id: muse.id }, alice.apiKey)).agent.memories).toHaveLength(mine.length - 1);
      expect(await t.rest('DELETE', `/v2/agents/${muse.id}/memories`, { key: alice.apiKey })).toMatchObject({
        status: 200,
        body: { deleted: mine.length - 1 },
      });
      expect((await t.rest('GET', `/v2/agents/${muse.id}/memories`, { key: alice.apiKey })).body).toEqual({ memories: [] });
    });
  });
});
