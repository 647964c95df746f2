import { afterAll, beforeEach, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI, RecordedRequest } from '../helpers/fake-openai.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse } from '../helpers/sse.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError } from './support.ts';

// Tool calls that wait for approval, in GraphQL: the reply pauses (ToolApprovalRequested on
// sessionEvents, TaskApprovalRequested on taskUpdates, the call AWAITING_APPROVAL with its
// price), and settleToolApproval answers it: once, by the payer only.

const Send = graphql(`
  mutation SendForApproval($input: SendMessageInput!) {
    sendMessage(input: $input) { seq session { rawId } }
  }
`);
const Settle = graphql(`
  mutation SettleApproval($input: SettleToolApprovalInput!) {
    settleToolApproval(input: $input) { id status approval cost error }
  }
`);
const Events = graphql(`
  subscription ApprovalEvents($sessionId: ID!, $after: Seq) {
    sessionEvents(sessionId: $sessionId, after: $after) {
      __typename
      ... on ToolApprovalRequested { expiresAt toolCall { id tool args status approval cost } }
      ... on AssistantMessage { message { status content toolCalls { id status approval cost } } }
    }
  }
`);
const Feed = graphql(`
  subscription ApprovalFeed($after: Seq) {
    taskUpdates(after: $after) {
      __typename
      ... on TaskApprovalRequested { rawTaskId toolKey args cost expiresAt }
    }
  }
`);

let t: TestApp;
let llm: FakeOpenAI;
let svc: Awaited<ReturnType<typeof startFakeToolService>>;
let alice: TestUser;
let bob: TestUser;
let agentId: string;
const ws = graphqlWsClients(() => t.url);
afterAll(() => ws.disposeAll());

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Done.'] });
  svc = await start.service(startFakeToolService({ answer: { result: { made: 'a picture' } } }));
  const toolsDir = await toolRegistryWith({ remote_maker: httpTool('remote_maker', svc.url) });
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, toolsDir });
  [alice, bob] = await Promise.all([t.createUser('alice'), t.createUser('bob')]);
  await t.services.manna.grant('alice', '50', 'forever');
  agentId = (
    await fixtures(t).agent(alice, { name: 'Ada', tools: { remote_maker: true }, toolApproval: { tools: { remote_maker: 'always' } } })
  ).id;
});
beforeEach(() => {
  llm.reset();
  svc.reset();
});

const asks = (r: RecordedRequest, text: string) => r.body.messages.at(-1)?.content === text;

async function ledgerAddsUp(user: TestUser) {
  const row = await t.db.user.findUniqueOrThrow({ where: { id: user.id } });
  const rows = await t.db.mannaLedger.findMany({ where: { userId: user.id } });
  const sum = rows.reduce((s, r) => s + r.amount.toNumber(), 0);
  const balance = row.subscriptionBalance.toNumber() + row.foreverBalance.toNumber();
  expect(sum).toBe(balance);
  return balance;
}

/** A new session whose reply waits for the call to be approved; the session's events and alice's feed watched. */
async function pausedReply(prompt: string) {
  llm.choose((r) => {
    if (asks(r, prompt))
      return { tokens: ['On it.'], toolCalls: [{ id: 'call_1', name: 'remote_maker', arguments: '{"prompt":"a heron","n":3}' }] };
    if (r.body.messages.at(-1)?.role === 'tool') return { tokens: [' Made.'] };
    return undefined;
  });
  const restFeed = await openSse(`${t.url}/v2/tasks/events`, { headers: { 'x-api-key': alice.apiKey } }, { apart: ['task-update'] });
  const sent = expectData(await t.gql(Send, { input: { agentIds: [agentId], content: prompt } }, alice.apiKey)).sendMessage;
  const sessionId = sent.session.rawId;
  const events = wsSubscribe(ws.connect(alice.apiKey), Events, { sessionId, after: sent.seq! - 1 });
  const requested = await events.waitFor((r) => r.data?.sessionEvents.__typename === 'ToolApprovalRequested');
  const event = requested.data!.sessionEvents as { toolCall: { id: string } };
  // Alice's feed over GraphQL, resumed from just before that event (its seq read where it was
  // first seen, on REST's stream of the same feed, opened before the prompt).
  const seen = await restFeed.waitFor((f) => f.data?.data?.type === 'tool_approval_requested');
  restFeed.close();
  const feed = wsSubscribe(ws.connect(alice.apiKey), Feed, { after: seen.id! - 1 });
  return { sessionId, events, feed, event, callId: event.toolCall.id };
}

it('a call waiting for approval is told on sessionEvents and taskUpdates; settleToolApproval runs it once, charged, and the reply goes on', async () => {
  const before = await ledgerAddsUp(alice);
  const { sessionId, events, feed, event, callId } = await pausedReply('draw three herons');
  expect(event).toMatchObject({
    toolCall: { tool: 'remote_maker', args: { prompt: 'a heron', n: 3 }, status: 'AWAITING_APPROVAL', approval: 'REQUESTED', cost: 3 },
  });
  const told = await feed.waitFor((r) => r.data?.taskUpdates.__typename === 'TaskApprovalRequested');
  expect(told.data!.taskUpdates).toMatchObject({ rawTaskId: callId, toolKey: 'remote_maker', args: { prompt: 'a heron', n: 3 }, cost: 3 });
  expect(svc.calls).toHaveLength(0);

  // Bob is no payer: the call is not his to see.
  const stranger = await t.gql(Settle, { input: { sessionId, callId, approve: true } }, bob.apiKey);
  expect(expectGraphQLError(stranger, 'NOT_FOUND')).toBeTruthy();

  const settled = expectData(await t.gql(Settle, { input: { sessionId, callId, approve: true } }, alice.apiKey));
  expect(settled.settleToolApproval).toMatchObject({ id: callId, approval: 'APPROVED' });
  const done = await events.waitFor(
    (r) =>
      r.data?.sessionEvents.__typename === 'AssistantMessage' &&
      (r.data.sessionEvents as { message: { status: string } }).message.status === 'COMPLETE',
  );
  expect(done.data!.sessionEvents).toMatchObject({
    message: { content: 'On it. Made.', toolCalls: [{ id: callId, status: 'COMPLETED', approval: 'APPROVED', cost: 3 }] },
  });
  expect(svc.calls).toHaveLength(1);
  expect(await ledgerAddsUp(alice)).toBe(before - 3);
  expect(expectGraphQLError(await t.gql(Settle, { input: { sessionId, callId, approve: false } }, alice.apiKey), 'CONFLICT')).toBeTruthy();
  events.unsubscribe();
  feed.unsubscribe();
});

it('denied with a reason: the model is told it, nothing is charged, the reply goes on', async () => {
  const before = await ledgerAddsUp(alice);
  const { sessionId, events, feed, callId } = await pausedReply('draw herons');
  const settled = expectData(await t.gql(Settle, { input: { sessionId, callId, approve: false, reason: 'not now' } }, alice.apiKey));
  expect(settled.settleToolApproval).toMatchObject({
    status: 'FAILED',
    approval: 'DENIED',
    cost: null,
    error: 'Denied by the user who pays for it: not now',
  });
  await events.waitFor(
    (r) =>
      r.data?.sessionEvents.__typename === 'AssistantMessage' &&
      (r.data.sessionEvents as { message: { status: string } }).message.status === 'COMPLETE',
  );
  const told = llm
    .replyRequests()
    .at(-1)!
    .body.messages.find((m) => m.role === 'tool')!;
  expect(JSON.parse(told.content as string)).toEqual({ error: 'Denied by the user who pays for it: not now' });
  expect(svc.calls).toHaveLength(0);
  expect(await ledgerAddsUp(alice)).toBe(before);
  events.unsubscribe();
  feed.unsubscribe();
});
