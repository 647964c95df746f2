import { afterAll, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { setUp } from '../helpers/set-up.ts';
import { until } from '../helpers/until.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError } from './support.ts';

// Autonomous sessions in GraphQL: the settings on sendMessage and updateSession (and their
// refusal without a budget), shown on Session; each turn and the stop seen in sessionEvents.

const Send = graphql(`
  mutation SendAutonomous($input: SendMessageInput!) {
    sendMessage(input: $input) { seq session { rawId autonomySettings { autoReply replyInterval actorSelectionMethod } } }
  }
`);
const Update = graphql(`
  mutation UpdateSession($id: ID!, $input: UpdateSessionInput!) {
    updateSession(id: $id, input: $input) { rawId title autonomySettings { autoReply replyInterval actorSelectionMethod } }
  }
`);
const Events = graphql(`
  subscription AutonomyEvents($sessionId: ID!, $after: Seq) {
    sessionEvents(sessionId: $sessionId, after: $after) {
      __typename
      seq
      ... on AutonomousTurnStarted { promptId replyId agentId }
      ... on AssistantMessage { promptId message { content } }
      ... on AutonomyStopped { reason detail }
    }
  }
`);

let t: TestApp;
let alice: TestUser;
let bob: TestUser;
let agentIds: string[];
const ws = graphqlWsClients(() => t.url);
afterAll(() => ws.disposeAll());

setUp(async (start) => {
  const llm = await start.fakeOpenAI({ tokens: ['Quite', ' so', '.'] });
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, jobs: { pollMs: 500, superviseS: 1 } });
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
  const f = fixtures(t);
  agentIds = [(await f.agent(alice, { name: 'Ada' })).id, (await f.agent(alice, { name: 'Bo' })).id];
});

const off = { autoReply: false, replyInterval: 60, actorSelectionMethod: 'RANDOM' as const };

it('refuses auto-reply without a budget, and shows the settings on the session', async () => {
  const refused = await t.gql(Send, { input: { agentIds, content: 'Hello', autonomySettings: { ...off, autoReply: true } } }, alice.apiKey);
  expect(expectGraphQLError(refused, 'BAD_USER_INPUT').message).toBe('Session cannot have auto-reply enabled without a set budget');
  const bad = await t.gql(Send, { input: { agentIds, content: 'Hello', autonomySettings: { ...off, replyInterval: 4000 } } }, alice.apiKey);
  expect(expectGraphQLError(bad, 'BAD_USER_INPUT').extensions?.field).toBe('autonomySettings.replyInterval');
  const sent = expectData(await t.gql(Send, { input: { agentIds, content: 'Hello', autonomySettings: off } }, alice.apiKey));
  expect(sent.sendMessage.session.autonomySettings).toEqual(off);
  const id = sent.sendMessage.session.rawId;
  expectGraphQLError(await t.gql(Update, { id, input: { autonomySettings: { ...off, autoReply: true } } }, alice.apiKey), 'BAD_USER_INPUT');
  expectGraphQLError(await t.gql(Update, { id, input: { title: 'Mine now' } }, bob.apiKey), 'FORBIDDEN');
  const renamed = expectData(
    await t.gql(Update, { id, input: { title: 'Tides', autonomySettings: { ...off, replyInterval: 5 } } }, alice.apiKey),
  );
  expect(renamed.updateSession).toEqual({ rawId: id, title: 'Tides', autonomySettings: { ...off, replyInterval: 5 } });
});

it('streams each turn to sessionEvents, and the stop with its reason when the owner turns it off', async () => {
  // An empty session: an agent opens the conversation as soon as the loop starts.
  const sent = expectData(await t.gql(Send, { input: { agentIds, budget: { turnBudget: 50 } } }, alice.apiKey));
  const sessionId = sent.sendMessage.session.rawId;
  const watching = t.services.bus.subscriberCount();
  const events = wsSubscribe(ws.connect(alice.apiKey), Events, { sessionId });
  // Nothing has happened in the session yet to replay: the subscription must be open before the loop starts.
  await expect.poll(() => t.services.bus.subscriberCount()).toBe(watching + 1);
  const on = { autoReply: true, replyInterval: 30, actorSelectionMethod: 'RANDOM_EXCLUDE_LAST' as const };
  expect(
    expectData(await t.gql(Update, { id: sessionId, input: { autonomySettings: on } }, alice.apiKey)).updateSession.autonomySettings,
  ).toEqual(on);
  const turn = await events.waitFor((r) => r.data?.sessionEvents.__typename === 'AutonomousTurnStarted');
  const turnEvent = turn.data!.sessionEvents as { promptId: string; replyId: string };
  expect(turnEvent.promptId).toBe(turnEvent.replyId);
  const reply = await events.waitFor(
    (r) =>
      r.data?.sessionEvents.__typename === 'AssistantMessage' &&
      (r.data.sessionEvents as { promptId: string }).promptId === turnEvent.promptId,
  );
  expect((reply.data!.sessionEvents as { message: { content: string } }).message.content).toBe('Quite so.');
  // The next turn waits 30 s; the owner turns the loop off meanwhile.
  const turnedOff = expectData(
    await t.gql(Update, { id: sessionId, input: { autonomySettings: { ...on, autoReply: false } } }, alice.apiKey),
  );
  expect(turnedOff.updateSession.autonomySettings?.autoReply).toBe(false);
  const stop = await events.waitFor((r) => r.data?.sessionEvents.__typename === 'AutonomyStopped');
  expect(stop.data!.sessionEvents).toMatchObject({ reason: 'TURNED_OFF', detail: 'Auto-reply was turned off' });
  events.unsubscribe();
  // The turn job that took the turn may have sent the next one just after the stop dropped the
  // waiting one: it takes its own back once it sees the loop is off.
  await until('no turn waiting', async () => !(await t.services.jobs.waiting('autonomous-turn', sessionId)), { timeoutMs: 10_000 });
});
