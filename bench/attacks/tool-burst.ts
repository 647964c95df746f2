// One prompt asking for a burst of paid image tools (16 flux_schnell calls of 6 images each, at
// 1024²), against the real app on loopback with the fake OpenAI-compatible model; /healthz is
// polled all along. Prints /healthz latency idle (the baseline, same run) and during the burst,
// the ratio, every non-200 answer, and what the burst made of the 16 calls.
//   npx tsx bench/attacks/tool-burst.ts [--calls 16 --images 6 --per-model-call 8 --workers 2]
import { parseArgs } from 'node:util';
import { startTestApp } from '../../test/helpers/app.ts';
import { startFakeOpenAI } from '../../test/helpers/fake-openai.ts';
import { fixtures } from '../../test/helpers/fixtures.ts';

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '16' },
    images: { type: 'string', default: '6' },
    'per-model-call': { type: 'string', default: '8' },
    workers: { type: 'string', default: '2' },
  },
});
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const llm = await startFakeOpenAI({ tokens: ['Done.'] });
const t = await startTestApp({
  llm: { baseUrl: llm.baseUrl },
  work: { toolCallsPerModelCall: Number(values['per-model-call']), imageWorkers: Number(values.workers) },
});
try {
  const user = await t.createUser('painter');
  await t.services.manna.grant(user.username, '100000', 'subscription');
  const agent = await fixtures(t).agent(user, { name: 'Painter', key: 'burst-painter', tools: { flux_schnell: true } });

  async function health(samples: number[], statuses: number[]) {
    const started = performance.now();
    const res = await fetch(`${t.url}/healthz`);
    await res.arrayBuffer();
    samples.push(performance.now() - started);
    statuses.push(res.status);
  }
  const stats = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!.toFixed(1);
    return { n: s.length, p50: at(0.5), p95: at(0.95), max: s.at(-1)!.toFixed(1) };
  };

  const idle: number[] = [];
  const idleStatus: number[] = [];
  for (let i = 0; i < 50; i++) {
    await health(idle, idleStatus);
    await pause(20);
  }

  llm.enqueue(
    {
      toolCalls: Array.from({ length: Number(values.calls) }, (_, i) => ({
        id: `call_${i}`,
        name: 'flux_schnell',
        arguments: JSON.stringify({ prompt: `lighthouse ${i} at dusk`, n_samples: Number(values.images), resolution: '1024x1024' }),
      })),
    },
    { tokens: ['All painted.'] },
  );
  const started = performance.now();
  const res = await t.rest('POST', '/v2/sessions', { key: user.apiKey, body: { agent_ids: [agent.id], content: 'paint' } });
  const sessionId = res.body.session_id as string;
  const busy: number[] = [];
  const busyStatus: number[] = [];
  let reply: { status: string; tool_calls: { status: string; error: string | null }[] } | undefined;
  for (;;) {
    await health(busy, busyStatus);
    const read = await t.rest('GET', `/v2/sessions/${sessionId}`, { key: user.apiKey });
    reply = read.body.messages.find((m: { role: string }) => m.role === 'assistant');
    if (reply && reply.status !== 'streaming') break;
    await pause(20);
  }
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  const byStatus = new Map<string, number>();
  for (const c of reply!.tool_calls) byStatus.set(c.status, (byStatus.get(c.status) ?? 0) + 1);
  const idleStats = stats(idle);
  const busyStats = stats(busy);
  console.log(
    `calls ${values.calls} x ${values.images} images, at most ${values['per-model-call']} per model call, ${values.workers} image workers`,
  );
  console.log(`reply ${reply!.status} after ${seconds} s; tool calls: ${[...byStatus].map(([s, n]) => `${s} ${n}`).join(', ')}`);
  console.log(`/healthz idle (ms):  `, idleStats, 'non-200:', idleStatus.filter((s) => s !== 200).length);
  console.log(`/healthz burst (ms): `, busyStats, 'non-200:', busyStatus.filter((s) => s !== 200).length);
  console.log(`p50 ratio burst/idle: ${(Number(busyStats.p50) / Number(idleStats.p50)).toFixed(2)}`);
} finally {
  await t.close();
  await llm.close();
}
