// The floor of this machine for the stream benchmark: a bare pass-through relay. For each client
// request it calls the provider and forwards each content delta as an SSE frame, with nothing
// else (no database, no auth, no engine). Run as its own process:
//   node --import tsx bench/relay.ts <provider base URL>   (prints the port it listens on)
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MAX_CHUNK_CHARS } from '../src/domain/replies/providers/openai.ts';
import { SseEventReader } from '../src/domain/replies/providers/sse-lines.ts';

const provider = process.argv[2]!;

const server = createServer(async (req, res) => {
  let body = '';
  for await (const chunk of req) body += chunk;
  const { content } = JSON.parse(body) as { content: string };
  const upstream = await fetch(`${provider}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'relay', stream: true, messages: [{ role: 'user', content }] }),
  });
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const events = new SseEventReader(MAX_CHUNK_CHARS, (data) => {
    if (data === '[DONE]') return;
    const text = (JSON.parse(data) as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta?.content;
    if (text) res.write(`data: ${JSON.stringify({ event: 'update', data: { type: 'assistant_token', text } })}\n\n`);
  });
  for await (const chunk of upstream.body!) events.push(chunk);
  events.end();
  res.end(`data: ${JSON.stringify({ event: 'done', data: '' })}\n\n`);
});
server.listen(0, '127.0.0.1', () => console.log(`relay listening on ${(server.address() as AddressInfo).port}`));
