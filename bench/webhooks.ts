// npm run bench:webhooks [-- --events 1000 --endpoints 10 --rounds 2]
//
// The delay from an event to its receiver: events recorded (webhook.test, each to one of the
// endpoints, spread evenly) on the real app in process, delivered through its sweep, the pg-boss
// queue, signing and a real HTTP POST to receivers on loopback, which stamp the arrival. The
// baseline, in the same run and interleaved: as many bare jobs sent on the same queue system and
// worked with no delivery at all (sent → handler), the floor any work on the queue has. Reports
// p50 and p99 of each, their ratios, and how many events never arrived (lost: must be 0).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { startTestApp } from '../test/helpers/app.ts';
import { quantile } from './streaming.ts';

const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '1000' },
    endpoints: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '2' },
  },
});
const EVENTS = Number(values.events);
const ENDPOINTS = Number(values.endpoints);
const ROUNDS = Number(values.rounds);

/** Receivers that stamp when each event arrives (by webhook-id), answering 204 at once. */
async function receivers(count: number, arrived: Map<string, number>) {
  const servers: Server[] = [];
  for (let i = 0; i < count; i++) {
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const id = String(req.headers['webhook-id']);
        if (!arrived.has(id)) arrived.set(id, performance.now());
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
  }
  return servers;
}

const t = await startTestApp({ outbound: { allowHttp: true, allowPrivate: true } });
const user = await t.createUser('bench');
const arrived = new Map<string, number>();
const servers = await receivers(ENDPOINTS, arrived);
const endpoints: string[] = [];
for (const server of servers) {
  const port = (server.address() as AddressInfo).port;
  const made = await t.services.webhooks.create({ id: user.id }, { url: `http://127.0.0.1:${port}/hook`, eventTypes: ['webhook.test'] });
  endpoints.push(made.webhook.id);
}

const BASELINE_QUEUE = 'bench-baseline';
const handled = new Map<string, number>();
await t.services.jobs.declare({ name: BASELINE_QUEUE, retries: 0, retryDelaySeconds: 1, runSeconds: 60 });
await t.services.jobs.work<{ n: string }>(BASELINE_QUEUE, { concurrency: 64 }, async (job) => {
  handled.set(job.data.n, performance.now());
});

const waitFor = async (done: () => boolean, ms: number) => {
  const until = Date.now() + ms;
  while (!done() && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
};

async function baselineRound(round: number) {
  const sent = new Map<string, number>();
  await Promise.all(
    Array.from({ length: EVENTS }, async (_, i) => {
      const n = `${round}-${i}`;
      sent.set(n, performance.now());
      await t.services.jobs.send(BASELINE_QUEUE, { n });
    }),
  );
  await waitFor(() => [...sent.keys()].every((n) => handled.has(n)), 120_000);
  return {
    delays: [...sent].flatMap(([n, at]) => (handled.has(n) ? [handled.get(n)! - at] : [])),
    lost: [...sent.keys()].filter((n) => !handled.has(n)).length,
  };
}

async function webhookRound() {
  const sent = new Map<string, number>();
  await Promise.all(
    Array.from({ length: EVENTS }, async (_, i) => {
      const at = performance.now();
      const delivery = await t.services.webhooks.test({ id: user.id }, endpoints[i % ENDPOINTS]!);
      sent.set(delivery.eventId, at);
    }),
  );
  await waitFor(() => [...sent.keys()].every((id) => arrived.has(id)), 180_000);
  return {
    delays: [...sent].flatMap(([id, at]) => (arrived.has(id) ? [arrived.get(id)! - at] : [])),
    lost: [...sent.keys()].filter((id) => !arrived.has(id)).length,
  };
}

const line = (label: string, r: { delays: number[]; lost: number }, base: number[]) =>
  `${label.padEnd(10)} p50 ${quantile(r.delays, 0.5).toFixed(0).padStart(6)} ms  p99 ${quantile(r.delays, 0.99).toFixed(0).padStart(6)} ms  ` +
  `(${(quantile(r.delays, 0.5) / quantile(base, 0.5)).toFixed(2)}× / ${(quantile(r.delays, 0.99) / quantile(base, 0.99)).toFixed(2)}× the baseline)  lost ${r.lost}`;

let lostAny = 0;
console.log(`${EVENTS} events to ${ENDPOINTS} endpoints, ${ROUNDS} rounds; baseline: as many bare jobs on the same queue`);
for (let round = 1; round <= ROUNDS; round++) {
  const base = await baselineRound(round);
  const hooks = await webhookRound();
  lostAny += base.lost + hooks.lost;
  console.log(`round ${round}`);
  console.log(line('baseline', base, base.delays));
  console.log(line('webhooks', hooks, base.delays));
}
for (const server of servers) server.close();
await t.close();
process.exit(lostAny ? 1 : 0);
