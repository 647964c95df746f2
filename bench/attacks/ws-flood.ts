// The WebSocket flood of the hostile-clients review, against a running server: a few sockets
// (keyless by default) each send thousands of introspection operations and never read a reply.
// Reports the server's memory (RSS from /proc) and /healthz latency during the attack, what the
// attacker saw, and how many lines the server printed to stderr.
//   npx tsx bench/attacks/ws-flood.ts --url http://127.0.0.1:4000 --pid <server pid> [--sockets 3 --ops 5000 --key pk_...]
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';

const { values } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://127.0.0.1:4000' },
    pid: { type: 'string' },
    sockets: { type: 'string', default: '3' },
    ops: { type: 'string', default: '5000' },
    key: { type: 'string' },
    seconds: { type: 'string', default: '20' },
  },
});
const url = values.url!;
const pid = values.pid ? Number(values.pid) : null;
const query =
  '{ __schema { types { name kind description fields { name description args { name type { name } } type { name kind ofType { name kind } } } } } }';

const rssMb = async () => (pid ? Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))![1]) / 1024 : NaN);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function healthLatency(): Promise<number> {
  const started = performance.now();
  try {
    await (await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(30_000) })).text();
    return performance.now() - started;
  } catch {
    return Infinity;
  }
}

const before = await rssMb();
let peak = before;
const latencies: number[] = [];
let attacking = true;
const watcher = (async () => {
  while (attacking) {
    peak = Math.max(peak, await rssMb());
    latencies.push(await healthLatency());
    await sleep(250);
  }
})();

const seen = { acks: 0, messages: 0, errors: 0, closes: [] as string[] };
const sockets = Array.from({ length: Number(values.sockets) }, () => {
  const ws = new WebSocket(`${url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
  ws.on('message', (data) => {
    const type = JSON.parse(String(data)).type;
    if (type === 'connection_ack') seen.acks++;
    else if (type === 'error') seen.errors++;
    else seen.messages++;
  });
  ws.on('close', (code, reason) => seen.closes.push(`${code} ${reason}`));
  ws.on('error', () => {});
  ws.on('open', async () => {
    ws.send(JSON.stringify({ type: 'connection_init', payload: values.key ? { 'X-Api-Key': values.key } : {} }));
    await sleep(200);
    // Stop reading: everything the server answers stays on its side of the socket.
    (ws as unknown as { _socket: { pause(): void } })._socket.pause();
    for (let i = 0; i < Number(values.ops) && ws.readyState === WebSocket.OPEN; i++) {
      ws.send(JSON.stringify({ id: String(i), type: 'subscribe', payload: { query } }));
      if (i % 100 === 99) await sleep(1);
    }
  });
  return ws;
});

await sleep(Number(values.seconds) * 1000);
const during = [...latencies];
for (const ws of sockets) ws.terminate();
await sleep(3000);
attacking = false;
await watcher;
const after = await rssMb();
const sorted = during.sort((a, b) => a - b);
console.log(
  JSON.stringify(
    {
      rssMb: { before: Math.round(before), peak: Math.round(peak), afterDisconnect: Math.round(after) },
      healthzMs: {
        p50: Math.round(sorted[Math.floor(sorted.length / 2)] ?? NaN),
        max: Math.round(sorted.at(-1) ?? NaN),
        samples: sorted.length,
      },
      attackerSaw: { ...seen, closes: [...new Set(seen.closes)] },
    },
    null,
    2,
  ),
);
process.exit(0);
