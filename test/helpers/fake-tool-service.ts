import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** How the fake tool service answers one call; a function answer is given the call's body. */
export type ToolBehaviour =
  | { answer: unknown; status?: number; gate?: Promise<void> }
  /** Never answers; reports when the caller gave up (the connection closed). */
  | { hang: true }
  /** Answers as a stream of JSON lines (progress, then the answer), waiting for `before(i)` ahead of line i. */
  | { lines: unknown[]; before?: (index: number) => Promise<void> };

export interface ToolServiceCall {
  body: { tool: string; arguments: Record<string, unknown>; session_id: string };
  abandoned: Promise<void>;
}

/** A tool service on loopback speaking parley's HTTP tool protocol, scripted per call. */
export async function startFakeToolService(defaultBehaviour: ToolBehaviour = { answer: { result: { ok: true } } }) {
  const queue: ToolBehaviour[] = [];
  const calls: ToolServiceCall[] = [];
  const sockets = new Set<Socket>();
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const abandoned = new Promise<void>((resolve) => res.once('close', () => resolve()));
    const body = JSON.parse(raw);
    calls.push({ body, abandoned });
    const behaviour = queue.shift() ?? defaultBehaviour;
    if ('hang' in behaviour) return;
    if ('lines' in behaviour) {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      for (const [i, line] of behaviour.lines.entries()) {
        await behaviour.before?.(i);
        if (res.destroyed) return;
        res.write(`${JSON.stringify(line)}\n`);
      }
      return void res.end();
    }
    await behaviour.gate;
    res
      .writeHead(behaviour.status ?? 200, { 'content-type': 'application/json' })
      .end(JSON.stringify(typeof behaviour.answer === 'function' ? behaviour.answer(body) : behaviour.answer));
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/run`,
    calls,
    enqueue: (...b: ToolBehaviour[]) => queue.push(...b),
    reset() {
      queue.length = 0;
      calls.length = 0;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
