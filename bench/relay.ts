// The floor of this machine for the stream benchmark: a bare pass-through relay. For each client
// request it calls the provider and forwards each content delta as an SSE frame, with nothing
// else (no database, no auth, no engine). Run as its own process:
//   node --import tsx bench/relay.ts <provider base URL> [--store <data dir>]   (prints the port it listens on)
//
// On /graphql it does the same over graphql-ws: graphql-ws's own server on graphql-js, a
// `sendMessage` subscription whose events are the deltas, and nothing else. It shows what that
// protocol and a GraphQL execution per event cost by themselves on this machine.
//
// With --store it also keeps each conversation the least a service that stores conversations
// can: an embedded PGlite on a worker thread (as parley's default), one statement for the
// requests that arrived together (a conversation, its prompt and a placeholder reply each, written
// before the provider is called) and one for the replies that ended together (their text). It
// shows what storing alone costs on this machine, next to parley, which stores much more.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Worker } from 'node:worker_threads';
import { buildSchema } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import { WebSocketServer } from 'ws';
import { coalesced } from '../src/domain/core/coalesce.ts';
import { MAX_CHUNK_CHARS } from '../src/providers/chat/openai.ts';
import { SseEventReader } from '../src/providers/chat/sse-lines.ts';

const provider = process.argv[2]!;
const storeAt = process.argv.indexOf('--store');
const store = storeAt > 0 ? await openStore(process.argv[storeAt + 1]!) : null;

async function openStore(dataDir: string) {
  const worker = new Worker(new URL('./relay-store-worker.js', import.meta.url), { workerData: { dataDir } });
  await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  const waiting = new Map<number, (error?: string) => void>();
  let last = 0;
  worker.on('message', ({ id, error }: { id: number; error?: string }) => waiting.get(id)?.(error));
  const query = (sql: string, params: unknown[]) =>
    new Promise<void>((resolve, reject) => {
      const id = ++last;
      waiting.set(id, (error) => {
        waiting.delete(id);
        if (error) reject(new Error(error));
        else resolve();
      });
      worker.postMessage({ id, sql, params });
    });
  // Grouped by parley's own helper: what arrives while a statement of its kind is under way goes in the next.
  const grouped = <T>(write: (rows: readonly T[]) => Promise<void>) =>
    coalesced<T, true>(async (rows) => {
      await write(rows);
      return new Map(rows.map((r) => [r, true as const]));
    });
  const begin = grouped<{ conversation: string; prompt: string; reply: string; content: string }>((rows) =>
    query(
      `WITH c AS (INSERT INTO conversation (id) SELECT unnest($1::text[]) RETURNING id)
       INSERT INTO message (id, conversation, role, status, content)
       SELECT m.id, m.conversation, m.role, m.status, m.content
       FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) AS m(id, conversation, role, status, content)
       JOIN c ON c.id = m.conversation`,
      [
        rows.map((r) => r.conversation),
        rows.flatMap((r) => [r.prompt, r.reply]),
        rows.flatMap((r) => [r.conversation, r.conversation]),
        rows.flatMap(() => ['user', 'assistant']),
        rows.flatMap(() => ['complete', 'streaming']),
        rows.flatMap((r) => [r.content, '']),
      ],
    ),
  );
  const finish = grouped<{ reply: string; content: string }>((rows) =>
    query(
      `UPDATE message SET content = r.content, status = 'complete', updated = now()
       FROM unnest($1::text[], $2::text[]) AS r(id, content) WHERE message.id = r.id`,
      [rows.map((r) => r.reply), rows.map((r) => r.content)],
    ),
  );
  return { begin, finish };
}

/** The provider's streamed answer to `content`, and how to read a content delta out of each event. */
const ask = (content: string) =>
  fetch(`${provider}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'relay', stream: true, messages: [{ role: 'user', content }] }),
  });
const delta = (data: string) =>
  data === '[DONE]' ? undefined : (JSON.parse(data) as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta?.content;

const server = createServer(async (req, res) => {
  let body = '';
  for await (const chunk of req) body += chunk;
  const { content } = JSON.parse(body) as { content: string };
  const reply = randomUUID();
  await store?.begin.load({ conversation: randomUUID(), prompt: randomUUID(), reply, content });
  const upstream = await ask(content);
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let said = '';
  const events = new SseEventReader(MAX_CHUNK_CHARS, (data) => {
    const text = delta(data);
    if (!text) return;
    if (store) said += text;
    res.write(`data: ${JSON.stringify({ event: 'update', data: { type: 'assistant_token', text } })}\n\n`);
  });
  for await (const chunk of upstream.body!) events.push(chunk);
  events.end();
  await store?.finish.load({ reply, content: said });
  res.end(`data: ${JSON.stringify({ event: 'done', data: '' })}\n\n`);
});

// The same relay as a GraphQL subscription, accepting the benchmark's document as parley does.
const schema = buildSchema(`
  input SendMessageInput { agentIds: [ID!], content: String! }
  type AssistantToken { text: String! }
  union SessionEvent = AssistantToken
  type Query { ok: Boolean }
  type Subscription { sendMessage(input: SendMessageInput!): SessionEvent }
`);
async function* tokens({ input }: { input: { content: string } }) {
  const upstream = await ask(input.content);
  const ready: string[] = [];
  const events = new SseEventReader(MAX_CHUNK_CHARS, (data) => {
    const text = delta(data);
    if (text) ready.push(text);
  });
  const event = (text: string) => ({ sendMessage: { __typename: 'AssistantToken', text } });
  for await (const chunk of upstream.body!) {
    events.push(chunk);
    for (const text of ready.splice(0)) yield event(text);
  }
  events.end();
  for (const text of ready.splice(0)) yield event(text);
}
useServer({ schema, roots: { subscription: { sendMessage: tokens } } }, new WebSocketServer({ server, path: '/graphql' }));

server.listen(0, '127.0.0.1', () => console.log(`relay listening on ${(server.address() as AddressInfo).port}`));
