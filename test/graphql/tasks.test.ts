import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { settledSession } from '../helpers/sessions.ts';
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

let t: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;
let bob: TestUser;

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
