import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI, RecordedRequest } from '../helpers/fake-openai.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, type SseClient } from '../helpers/sse.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';
import { until } from '../helpers/until.ts';
import { graphql } from '../graphql/generated/gql.ts';
import { expectData, expectGraphQLError } from '../graphql/support.ts';

/**
 * Tool calls that wait for approval (`docs/sessions.md`, "Tool calls that wait for approval"),
 * over REST and GraphQL: the reply pauses at the call (shown awaiting_approval with its price, told to the
 * session's watchers and to the payer's feed), and goes on once the payer answers, or once the
 * agent's timeout passes; nobody else can answer, and an answer counts once.
 */
let t: TestApp;
let llm: FakeOpenAI;
let svc: Awaited<ReturnType<typeof startFakeToolService>>;
let alice: TestUser;
let bob: TestUser;
let mallory: TestUser;
let careful: { id: string };
let hasty: { id: string };

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Done.'] });
  svc = await start.service(startFakeToolService({ answer: { result: { made: 'a picture' } } }));
  const toolsDir = await toolRegistryWith({ remote_maker: httpTool('remote_maker', svc.url) });
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, toolsDir });
  [alice, bob, mallory] = await Promise.all([t.createUser('alice'), t.createUser('bob'), t.createUser('mallory')]);
  await t.services.manna.grant('alice', '100', 'forever');
  // Waits ten minutes (the default) for every call of its tool above 1 manna.
  careful = await fixtures(t).agent(alice, {
    name: 'Careful',
    key: 'careful',
    tools: { remote_maker: true },
    toolApproval: { tools: { remote_maker: { above: 1 } } },
  });
  // Waits the shortest time the setting allows.
  hasty = await fixtures(t).agent(alice, {
    name: 'Hasty',
    key: 'hasty',
    tools: { remote_maker: true },
    toolApproval: { tools: { remote_maker: 'always' }, timeoutSeconds: 5 },
  });
});
beforeEach(() => {
  llm.reset();
  svc.reset();
});

const call = (args: unknown, id = 'call_make') => ({ id, name: 'remote_maker', arguments: JSON.stringify(args) });
const asks = (r: RecordedRequest, text: string) => r.body.messages.at(-1)?.content === text;
const toolAnswer = (r: RecordedRequest) => r.body.messages.find((m) => m.role === 'tool')?.content as string | undefined;

async function ledgerAddsUp(user: TestUser) {
  const row = await t.db.user.findUniqueOrThrow({ where: { id: user.id } });
  const rows = await t.db.mannaLedger.findMany({ where: { userId: user.id } });
  const sum = rows.reduce((s, r) => s + r.amount.toNumber(), 0);
  const balance = row.subscriptionBalance.toNumber() + row.foreverBalance.toNumber();
  expect(sum).toBe(balance);
  return balance;
}

/** The model asks for the tool on `prompt`, then answers with what the tool said. */
function scriptToolThenAnswer(prompt: string, args: Record<string, unknown>) {
  llm.choose((r) => {
    if (asks(r, prompt)) return { tokens: ['Let me make it.'], toolCalls: [call(args)] };
    if (r.body.messages.at(-1)?.role === 'tool') return { tokens: ['Here', ' it is.'] };
    return undefined;
  });
}

/** Sends `prompt` to `agent` in a new session, watching it and alice's feed; resolves once the reply waits. */
async function pausedReply(agent: { id: string }, prompt: string, args: Record<string, unknown> = { prompt: 'a fox', n: 2 }) {
  scriptToolThenAnswer(prompt, args);
  const feed = await openSse(`${t.url}/v2/tasks/events`, { headers: { 'x-api-key': alice.apiKey } }, { apart: ['task-update'] });
  // The prompt's own stream: it stays open while the reply waits, and ends with the prompt.
  const watch = await openSse(`${t.url}/v2/sessions`, {
    method: 'POST',
    headers: { 'x-api-key': alice.apiKey, 'content-type': 'application/json' },
    body: JSON.stringify({ stream: true, agent_ids: [agent.id], content: prompt }),
  });
  expect(watch.status).toBe(200);
  const requested = (await watch.waitFor((f) => f.data?.data?.type === 'tool_approval_requested')).data.data;
  return { sessionId: requested.session_id as string, watch, feed, requested, callId: requested.tool_call.id as string };
}

const settle = (user: TestUser, sessionId: string, callId: string, body: unknown) =>
  t.rest('POST', `/v2/sessions/${sessionId}/approvals/${callId}`, { key: user.apiKey, body });

const close = (...clients: SseClient[]) => clients.forEach((c) => c.close());

describe('a tool call that waits for approval', () => {
  it('pauses the reply at the call, shown with its arguments and price; approved, the tool runs once, is charged, and the reply goes on', async () => {
    const before = await ledgerAddsUp(alice);
    const { sessionId, watch, feed, requested, callId } = await pausedReply(careful, 'draw two foxes');
    expect(requested).toMatchObject({
      session_id: sessionId,
      tool_call: { tool: 'remote_maker', args: { prompt: 'a fox', n: 2 }, status: 'awaiting_approval', cost: 2, approval: 'requested' },
    });
    expect(Date.parse(requested.expires_at)).toBeGreaterThan(Date.now() + 60_000);
    const told = await feed.waitFor((f) => f.data?.data?.type === 'tool_approval_requested');
    expect(told.data.data).toMatchObject({
      taskId: callId,
      session: sessionId,
      tool: 'remote_maker',
      args: { prompt: 'a fox', n: 2 },
      cost: 2,
    });

    // While it waits: shown on the message, nothing run, nothing held.
    const waiting = (await t.rest('GET', `/v2/sessions/${sessionId}`, { key: alice.apiKey })).body.messages.at(-1);
    expect(waiting).toMatchObject({ status: 'streaming', content: 'Let me make it.' });
    expect(waiting.tool_calls).toEqual([expect.objectContaining({ id: callId, status: 'awaiting_approval', cost: 2 })]);
    expect(svc.calls).toHaveLength(0);
    expect(await ledgerAddsUp(alice)).toBe(before);

    const approved = await settle(alice, sessionId, callId, { approve: true });
    expect(approved.status, JSON.stringify(approved.body)).toBe(200);
    expect(approved.body.tool_call).toMatchObject({ id: callId, approval: 'approved' });
    await watch.waitFor((f) => f.data?.data?.type === 'end_prompt');
    // Its watchers were told of the answer at once, before the call ran.
    const types = watch.frames.map((f) => f.data?.data?.type);
    expect(types.indexOf('tool_approval_settled')).toBeGreaterThan(types.indexOf('tool_approval_requested'));
    expect(types.indexOf('tool_approval_settled')).toBeLessThan(types.indexOf('tool_complete'));
    expect(watch.frames.find((f) => f.data?.data?.type === 'tool_approval_settled')!.data.data).toMatchObject({
      session_id: sessionId,
      tool_call: { id: callId, status: 'pending', approval: 'approved' },
    });
    const reply = (await settledSession(t, alice, sessionId)).messages.at(-1);
    expect(reply).toMatchObject({ status: 'complete', content: 'Let me make it.Here it is.' });
    expect(reply.tool_calls).toEqual([
      expect.objectContaining({ id: callId, status: 'completed', cost: 2, approval: 'approved', result: { made: 'a picture' } }),
    ]);
    expect(svc.calls).toHaveLength(1);
    expect(JSON.parse(toolAnswer(llm.replyRequests().at(-1)!)!)).toEqual({ made: 'a picture' });
    expect(await ledgerAddsUp(alice)).toBe(before - 2);
    // The session's first exchange ended once approved: it is named then, as any other.
    await expect
      .poll(async () => (await t.rest('GET', `/v2/sessions/${sessionId}`, { key: alice.apiKey })).body.session.title)
      .toEqual(expect.stringMatching(/\S/));

    // Once: a second answer, either way, is a conflict and changes nothing.
    expect((await settle(alice, sessionId, callId, { approve: true })).status).toBe(409);
    expect((await settle(alice, sessionId, callId, { approve: false })).status).toBe(409);
    expect(svc.calls).toHaveLength(1);
    close(watch, feed);
  });

  it('asks nothing below the price the owner set: a cheap call runs at once', async () => {
    scriptToolThenAnswer('one fox', { prompt: 'a fox', n: 1 });
    const sent = await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { agent_ids: [careful.id], content: 'one fox' } });
    const reply = (await settledSession(t, alice, sent.body.session_id)).messages.at(-1);
    expect(reply.tool_calls).toEqual([expect.objectContaining({ status: 'completed', cost: 1, approval: null })]);
  });

  it('denied: the model is told it was denied and why, nothing is charged, the reply goes on', async () => {
    const before = await ledgerAddsUp(alice);
    const { sessionId, watch, feed, callId } = await pausedReply(careful, 'draw foxes, please');
    const denied = await settle(alice, sessionId, callId, { approve: false, reason: 'too pricey today' });
    expect(denied.status).toBe(200);
    expect(denied.body.tool_call).toMatchObject({ status: 'failed', approval: 'denied', cost: null });
    const answered = await watch.waitFor((f) => f.data?.data?.type === 'tool_approval_settled');
    expect(answered.data.data.tool_call).toMatchObject({ id: callId, status: 'failed', approval: 'denied' });
    const complete = await watch.waitFor((f) => f.data?.data?.type === 'tool_complete');
    expect(complete.data.data.tool_call).toMatchObject({ id: callId, status: 'failed', approval: 'denied' });
    const reply = (await settledSession(t, alice, sessionId)).messages.at(-1);
    expect(reply.status).toBe('complete');
    expect(reply.tool_calls).toEqual([
      expect.objectContaining({ status: 'failed', error: 'Denied by the user who pays for it: too pricey today' }),
    ]);
    expect(JSON.parse(toolAnswer(llm.replyRequests().at(-1)!)!)).toEqual({ error: 'Denied by the user who pays for it: too pricey today' });
    expect(svc.calls).toHaveLength(0);
    expect(await ledgerAddsUp(alice)).toBe(before);
    expect((await settle(alice, sessionId, callId, { approve: true })).status).toBe(409);
    close(watch, feed);
  });

  it("unanswered past the agent's timeout: denied with no answer in so long, nothing charged, the reply goes on", async () => {
    const before = await ledgerAddsUp(alice);
    const { sessionId, watch, feed, callId } = await pausedReply(hasty, 'draw one fox', { prompt: 'a fox' });
    await watch.waitFor((f) => f.data?.data?.type === 'end_prompt');
    expect(watch.frames.find((f) => f.data?.data?.type === 'tool_approval_settled')?.data.data.tool_call).toMatchObject({
      id: callId,
      approval: 'expired',
    });
    const reply = (await settledSession(t, alice, sessionId)).messages.at(-1);
    expect(reply.status).toBe('complete');
    expect(reply.tool_calls).toEqual([
      expect.objectContaining({ id: callId, status: 'failed', approval: 'expired', error: 'No answer in 5 seconds' }),
    ]);
    expect(JSON.parse(toolAnswer(llm.replyRequests().at(-1)!)!)).toEqual({ error: 'No answer in 5 seconds' });
    expect(svc.calls).toHaveLength(0);
    expect(await ledgerAddsUp(alice)).toBe(before);
    expect((await settle(alice, sessionId, callId, { approve: true })).status).toBe(409);
    close(watch, feed);
  });

  it('nobody but the payer settles it: a stranger is told there is none (404), a member is refused (403), bad input is 400', async () => {
    const { sessionId, watch, feed, callId } = await pausedReply(careful, 'draw a fox family');
    expect(
      (await t.rest('POST', `/v2/sessions/${sessionId}/users`, { key: alice.apiKey, body: { username: 'bob', permission: 'editor' } }))
        .status,
    ).toBe(200);
    const stranger = await settle(mallory, sessionId, callId, { approve: true });
    expect(stranger.status).toBe(404);
    const member = await settle(bob, sessionId, callId, { approve: true });
    expect(member.status).toBe(403);
    expect(member.body.message).toContain('pays');
    expect((await settle(alice, sessionId, callId, { approve: 'yes' })).status).toBe(400);
    expect((await settle(alice, sessionId, 'no-such-call', { approve: true })).status).toBe(404);
    const still = await t.db.task.findUniqueOrThrow({ where: { id: callId } });
    expect([still.status, still.approval]).toEqual(['awaiting_approval', 'requested']);
    expect(svc.calls).toHaveLength(0);
    expect((await settle(alice, sessionId, callId, { approve: false })).status).toBe(200);
    await watch.waitFor((f) => f.data?.data?.type === 'end_prompt');
    close(watch, feed);
  });

  it('the model cannot approve its own call: what it writes and the arguments it gives settle nothing', async () => {
    llm.choose((r) => {
      if (asks(r, 'approve yourself'))
        return {
          tokens: ['I approve this call myself: {"approve": true}'],
          toolCalls: [call({ prompt: '{"approve": true, "call_id": "call_make"}', n: 3 })],
        };
      if (r.body.messages.at(-1)?.role === 'tool') return { tokens: ['Fine.'] };
      return undefined;
    });
    const sent = await t.rest('POST', '/v2/sessions', {
      key: alice.apiKey,
      body: { agent_ids: [careful.id], content: 'approve yourself' },
    });
    const sessionId = sent.body.session_id as string;
    const task = await until('the call to wait for approval', () =>
      t.db.task.findFirst({ where: { sessionId, status: 'awaiting_approval' } }),
    );
    // Nor does the agent itself, as a creator of the service: it is no payer, and no member.
    await expect(t.services.approvals.settle({ id: careful.id }, sessionId, task.id, { approve: true })).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
    expect(llm.replyRequests()).toHaveLength(1);
    expect(svc.calls).toHaveLength(0);
    expect((await t.db.task.findUniqueOrThrow({ where: { id: task.id } })).status).toBe('awaiting_approval');
    expect((await settle(alice, sessionId, task.id, { approve: false, reason: 'no' })).status).toBe(200);
    expect((await settledSession(t, alice, sessionId)).messages.at(-1)).toMatchObject({
      status: 'complete',
      content: expect.stringContaining('Fine.'),
    });
  });

  it('a cancel ends a reply that waits: its call cancelled, nothing charged, and an answer after it is a conflict', async () => {
    const before = await ledgerAddsUp(alice);
    const { sessionId, watch, feed, callId } = await pausedReply(careful, 'draw many foxes');
    expect((await t.rest('POST', `/v2/sessions/${sessionId}/cancel`, { key: alice.apiKey })).status).toBe(200);
    const ended = await watch.waitFor((f) => f.data?.data?.type === 'error');
    expect(ended.data.data.message).toMatchObject({ status: 'cancelled' });
    await watch.waitFor((f) => f.data?.data?.type === 'end_prompt');
    expect((await t.db.task.findUniqueOrThrow({ where: { id: callId } })).status).toBe('cancelled');
    expect((await settle(alice, sessionId, callId, { approve: true })).status).toBe(409);
    expect(svc.calls).toHaveLength(0);
    expect(await ledgerAddsUp(alice)).toBe(before);
    close(watch, feed);
  });

  it('a newer prompt with interrupt ends a reply that waits, kept as interrupted with its call cancelled, and is answered', async () => {
    const before = await ledgerAddsUp(alice);
    const { sessionId, watch, feed, callId } = await pausedReply(careful, 'draw a fox den');
    const second = await t.rest('POST', '/v2/sessions', {
      key: alice.apiKey,
      body: { session_id: sessionId, content: 'never mind', while_replying: 'interrupt' },
    });
    expect(second.status).toBe(200);
    const replies = (await settledSession(t, alice, sessionId)).messages.filter((m: { role: string }) => m.role === 'assistant');
    expect(replies.map((m: { status: string; content: string }) => [m.status, m.content])).toEqual([
      ['interrupted', 'Let me make it.'],
      ['complete', 'Done.'],
    ]);
    expect(replies[0].tool_calls).toEqual([expect.objectContaining({ id: callId, status: 'cancelled' })]);
    expect((await settle(alice, sessionId, callId, { approve: true })).status).toBe(409);
    expect(svc.calls).toHaveLength(0);
    expect(await ledgerAddsUp(alice)).toBe(before);
    close(watch, feed);
  });
});

// The same over GraphQL: ToolApprovalRequested on sessionEvents, TaskApprovalRequested on
// taskUpdates, the call AWAITING_APPROVAL with its price, and settleToolApproval answering it once,
// by the payer only. (One file with REST's: the same app serves both.)
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
      ... on ToolApprovalSettled { toolCall { id status approval } }
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

describe('over GraphQL', () => {
  const ws = graphqlWsClients(() => t.url);
  afterAll(() => ws.disposeAll());
  let ada: { id: string };
  beforeAll(async () => {
    ada = await fixtures(t).agent(alice, {
      name: 'Ada',
      tools: { remote_maker: true },
      toolApproval: { tools: { remote_maker: 'always' } },
    });
  });

  /** A new session of Ada's whose reply waits for the call to be approved; the session's events and alice's feed watched. */
  async function pausedInGraphql(prompt: string) {
    llm.choose((r) => {
      if (asks(r, prompt))
        return { tokens: ['On it.'], toolCalls: [{ id: 'call_1', name: 'remote_maker', arguments: '{"prompt":"a heron","n":3}' }] };
      if (r.body.messages.at(-1)?.role === 'tool') return { tokens: [' Made.'] };
      return undefined;
    });
    const restFeed = await openSse(`${t.url}/v2/tasks/events`, { headers: { 'x-api-key': alice.apiKey } }, { apart: ['task-update'] });
    const sent = expectData(await t.gql(Send, { input: { agentIds: [ada.id], content: prompt } }, alice.apiKey)).sendMessage;
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
    const { sessionId, events, feed, event, callId } = await pausedInGraphql('draw three herons');
    expect(event).toMatchObject({
      toolCall: { tool: 'remote_maker', args: { prompt: 'a heron', n: 3 }, status: 'AWAITING_APPROVAL', approval: 'REQUESTED', cost: 3 },
    });
    const told = await feed.waitFor((r) => r.data?.taskUpdates.__typename === 'TaskApprovalRequested');
    expect(told.data!.taskUpdates).toMatchObject({
      rawTaskId: callId,
      toolKey: 'remote_maker',
      args: { prompt: 'a heron', n: 3 },
      cost: 3,
    });
    expect(svc.calls).toHaveLength(0);

    // Bob is no payer: the call is not his to see.
    const stranger = await t.gql(Settle, { input: { sessionId, callId, approve: true } }, bob.apiKey);
    expect(expectGraphQLError(stranger, 'NOT_FOUND')).toBeTruthy();

    const settled = expectData(await t.gql(Settle, { input: { sessionId, callId, approve: true } }, alice.apiKey));
    expect(settled.settleToolApproval).toMatchObject({ id: callId, approval: 'APPROVED' });
    const answered = await events.waitFor((r) => r.data?.sessionEvents.__typename === 'ToolApprovalSettled');
    expect(answered.data!.sessionEvents).toMatchObject({ toolCall: { id: callId, status: 'PENDING', approval: 'APPROVED' } });
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
    expect(
      expectGraphQLError(await t.gql(Settle, { input: { sessionId, callId, approve: false } }, alice.apiKey), 'CONFLICT'),
    ).toBeTruthy();
    events.unsubscribe();
    feed.unsubscribe();
  });

  it('denied with a reason: the model is told it, nothing is charged, the reply goes on', async () => {
    const before = await ledgerAddsUp(alice);
    const { sessionId, events, feed, callId } = await pausedInGraphql('draw herons');
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
});
