import { beforeEach, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { startNginx } from '../helpers/nginx.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, type SseClient, type SseFrame } from '../helpers/sse.ts';

/**
 * Event streams through nginx as it ships (response buffering on). The fake model sends token
 * k+1 only once the client, behind nginx, has received token k: a proxy that held the stream
 * back would starve the model, and the reply would end on the idle timeout with the tokens
 * still in the proxy. parley's `X-Accel-Buffering: no` is what lets them through.
 */
let t: TestApp;
let llm: FakeOpenAI;
let nginx: Awaited<ReturnType<typeof startNginx>>;
let alice: TestUser;
let agent: { id: string };

setUp(async (start) => {
  llm = await start.fakeOpenAI();
  // A stream held by the proxy fails this way rather than by the test's own timeout.
  t = await start.app({ llm: { baseUrl: llm.baseUrl, idleTimeoutMs: 10_000 } });
  nginx = await start.service(startNginx(t.url));
  alice = await t.createUser('alice');
  agent = await fixtures(t).agent(alice, { name: 'Relay', key: 'relay' });
});
beforeEach(() => llm.reset());

const TOKENS = ['One', ' by', ' one', ' through', ' the', ' proxy.'];

const deferred = () => {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
};

/**
 * Queues a reply whose token k+1 waits for `received[k]`, and resolves `received[k]` when the
 * client has token k; returns the texts in the order the client got them.
 */
async function lockstep(open: () => Promise<SseClient>, tokenText: (f: SseFrame) => string | undefined) {
  const received = TOKENS.map(() => deferred());
  llm.enqueue({ tokens: TOKENS, gate: (i) => (i === 0 ? undefined : received[i - 1]!.promise) });
  const client = await open();
  expect(client.status).toBe(200);
  expect(client.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const got: string[] = [];
  for (const [k, token] of TOKENS.entries()) {
    await client.waitFor((f) => tokenText(f) === token);
    got.push(token);
    received[k]!.resolve();
  }
  await client.done;
  return got;
}

describe('SSE behind nginx with its default buffering', () => {
  it('REST stream: true delivers each token before the model sends the next', async () => {
    const got = await lockstep(
      () =>
        openSse(`${nginx.url}/v2/sessions`, {
          method: 'POST',
          headers: { 'x-api-key': alice.apiKey, 'content-type': 'application/json' },
          body: JSON.stringify({ agent_ids: [agent.id], content: 'Tell me slowly', stream: true }),
        }),
      (f) => (f.event === 'update' && f.data.data.type === 'assistant_token' ? f.data.data.text : undefined),
    );
    expect(got.join('')).toBe(TOKENS.join(''));
  });

  it('a GraphQL subscription over SSE does too', async () => {
    const query =
      'subscription OpsRelay($input: SendMessageInput!) { sendMessage(input: $input) { __typename ... on AssistantToken { text } } }';
    const got = await lockstep(
      () =>
        openSse(`${nginx.url}/graphql`, {
          method: 'POST',
          headers: { 'x-api-key': alice.apiKey, 'content-type': 'application/json', accept: 'text/event-stream' },
          body: JSON.stringify({ query, variables: { input: { agentIds: [agent.id], content: 'Tell me slowly' } } }),
        }),
      (f) => (f.data?.data?.sendMessage?.__typename === 'AssistantToken' ? f.data.data.sendMessage.text : undefined),
    );
    expect(got.join('')).toBe(TOKENS.join(''));
  });
});
