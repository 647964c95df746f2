import { afterAll, beforeEach, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI, RecordedRequest } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { setUp } from '../helpers/set-up.ts';
import { until } from '../helpers/until.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError } from './support.ts';

// What a message does while an agent replies, in GraphQL: sendMessage's whileReplying (REJECT a
// CONFLICT, INTERRUPT a ReplyFailed with the message INTERRUPTED, ROLLBACK a ReplyRemoved), and
// the session's default on updateSession and Session.

const Send = graphql(`
  mutation SendWhileReplying($input: SendMessageInput!) {
    sendMessage(input: $input) { promptId replyIds seq session { rawId whileReplying } }
  }
`);
const Update = graphql(`
  mutation UpdateWhileReplying($id: ID!, $input: UpdateSessionInput!) {
    updateSession(id: $id, input: $input) { rawId whileReplying }
  }
`);
const Events = graphql(`
  subscription WhileReplyingEvents($sessionId: ID!, $after: Seq) {
    sessionEvents(sessionId: $sessionId, after: $after) {
      __typename
      seq
      ... on AssistantToken { text }
      ... on ReplyFailed { error message { rawId status content } }
      ... on ReplyRemoved { messageId promptId }
      ... on AssistantMessage { message { rawId status content } }
    }
  }
`);

let t: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;
let agentId: string;
const ws = graphqlWsClients(() => t.url);
afterAll(() => ws.disposeAll());

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Done.'] });
  t = await start.app({ llm: { baseUrl: llm.baseUrl } });
  alice = await t.createUser('alice');
  agentId = (await fixtures(t).agent(alice, { name: 'Ada' })).id;
});
beforeEach(() => llm.reset());

const asks = (r: RecordedRequest, text: string) => r.body.messages.at(-1)?.content === text;

/** A new session whose first reply has streamed "Partial" and is held there by the model. */
async function replyUnderWay() {
  llm.choose((r) => (asks(r, 'first') ? { tokens: ['Partial', ' rest'], stallAfter: 1 } : undefined));
  const sent = expectData(await t.gql(Send, { input: { agentIds: [agentId], content: 'first' } }, alice.apiKey)).sendMessage;
  const sessionId = sent.session.rawId;
  const events = wsSubscribe(ws.connect(alice.apiKey), Events, { sessionId, after: sent.seq! - 1 });
  await events.waitFor((r) => r.data?.sessionEvents.__typename === 'AssistantToken');
  const replyId = (await t.db.message.findFirstOrThrow({ where: { sessionId, role: 'assistant' } })).id;
  return { sessionId, events, replyId };
}

it('REJECT is a CONFLICT naming the reply; INTERRUPT keeps it as INTERRUPTED and answers the message', async () => {
  const { sessionId, events, replyId } = await replyUnderWay();
  const refused = await t.gql(Send, { input: { sessionId, content: 'second', whileReplying: 'REJECT' } }, alice.apiKey);
  expect(expectGraphQLError(refused, 'CONFLICT').message).toContain(replyId);
  const sent = expectData(await t.gql(Send, { input: { sessionId, content: 'second', whileReplying: 'INTERRUPT' } }, alice.apiKey));
  const failed = await events.waitFor((r) => r.data?.sessionEvents.__typename === 'ReplyFailed');
  expect(failed.data!.sessionEvents).toMatchObject({
    error: 'Interrupted by a newer prompt',
    message: { rawId: replyId, status: 'INTERRUPTED', content: 'Partial' },
  });
  const answered = await events.waitFor(
    (r) => r.data?.sessionEvents.__typename === 'AssistantMessage' && r.data.sessionEvents.message.status === 'COMPLETE',
  );
  expect(answered.data!.sessionEvents).toMatchObject({ message: { content: 'Done.' } });
  expect(sent.sendMessage.replyIds).toHaveLength(1);
  events.unsubscribe();
  expect(
    llm
      .replyRequests()
      .at(-1)!
      .body.messages.some((m) => m.content === 'Partial [interrupted]'),
  ).toBe(true);
});

it('ROLLBACK removes the reply (ReplyRemoved) and answers as if it never ran; the default is set on updateSession', async () => {
  const { sessionId, events, replyId } = await replyUnderWay();
  const shown = expectData(await t.gql(Update, { id: sessionId, input: { whileReplying: 'ROLLBACK' } }, alice.apiKey));
  expect(shown.updateSession).toEqual({ rawId: sessionId, whileReplying: 'ROLLBACK' });
  expectData(await t.gql(Send, { input: { sessionId, content: 'second' } }, alice.apiKey));
  const removed = await events.waitFor((r) => r.data?.sessionEvents.__typename === 'ReplyRemoved');
  expect(removed.data!.sessionEvents).toMatchObject({ __typename: 'ReplyRemoved' });
  await events.waitFor(
    (r) => r.data?.sessionEvents.__typename === 'AssistantMessage' && r.data.sessionEvents.message.status === 'COMPLETE',
  );
  events.unsubscribe();
  expect(await t.db.message.findUnique({ where: { id: replyId } })).toBeNull();
  await until('the reply saved', async () => (await t.db.message.count({ where: { sessionId, status: 'streaming' } })) === 0);
  expect(
    llm
      .replyRequests()
      .at(-1)!
      .body.messages.some((m) => m.content?.includes('Partial')),
  ).toBe(false);
});
