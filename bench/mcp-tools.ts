// npx tsx bench/mcp-tools.ts [-- --replies 12 --rounds 2 --timeout 10000 --deadline 120000]
//
// How long a reply takes to start when its agent has tools of an MCP server: the time from the
// prompt sent (REST, `stream: true`) to its first token, on the real app in process with the fake
// OpenAI server, for an agent whose server is healthy (the SDK's own McpServer on loopback) and
// one whose server takes every request and never answers, against an agent with no MCP tools (the
// baseline), interleaved reply by reply, `--replies` sequential replies of each a round. Reports
// the p50 and the worst of each and their ratios to the baseline, and counts replies that failed
// (no first token, an error frame) or did not end (no `end_prompt` within `--deadline`).
// `--timeout` is MCP_TIMEOUT_MS: the wait for a hanging server before its listing fails.
import { parseArgs } from 'node:util';
import { startTestApp } from '../test/helpers/app.ts';
import { startFakeOpenAI } from '../test/helpers/fake-openai.ts';
import { startMcpToolServer, startStuckServer } from '../test/helpers/mcp-tool-server.ts';
import { openSse } from '../test/helpers/sse.ts';
import { quantile } from './streaming.ts';

const { values } = parseArgs({
  options: {
    replies: { type: 'string', default: '12' },
    rounds: { type: 'string', default: '2' },
    timeout: { type: 'string', default: '10000' },
    deadline: { type: 'string', default: '120000' },
  },
});
const REPLIES = Number(values.replies);
const ROUNDS = Number(values.rounds);
const DEADLINE_MS = Number(values.deadline);

const llm = await startFakeOpenAI({ tokens: ['Ready', '.'] });
const healthy = await startMcpToolServer();
const stuck = await startStuckServer();
const t = await startTestApp({
  llm: { baseUrl: llm.baseUrl },
  outbound: { allowHttp: true, allowPrivate: true },
  mcp: { timeoutMs: Number(values.timeout) },
});
const user = await t.createUser('bench');

async function agent(key: string, server?: { name: string; url: string }) {
  let mcp_tools: { server_id: string; tool: string }[] = [];
  if (server) {
    const made = await t.rest('POST', '/v2/mcp/servers', { key: user.apiKey, body: server });
    mcp_tools = [{ server_id: made.body.server.id, tool: 'echo' }];
  }
  const made = await t.rest('POST', '/v2/agents', { key: user.apiKey, body: { name: key, key, mcp_tools } });
  if (made.status !== 201) throw new Error(`could not make the agent ${key}: ${JSON.stringify(made.body)}`);
  return made.body.agentId as string;
}

const kinds = {
  baseline: await agent('bench-plain'),
  healthy: await agent('bench-healthy', { name: 'healthy', url: healthy.url }),
  hanging: await agent('bench-hanging', { name: 'hanging', url: stuck.url }),
};
type Kind = keyof typeof kinds;

/** One reply: ms to its first token, or why it did not start or end. */
async function reply(agentId: string): Promise<{ ms: number } | { failed: string }> {
  const sent = performance.now();
  const s = await openSse(`${t.url}/v2/sessions`, {
    method: 'POST',
    headers: { 'x-api-key': user.apiKey, 'content-type': 'application/json' },
    body: JSON.stringify({ stream: true, agent_ids: [agentId], content: 'Start, please' }),
  });
  if (s.status !== 200) return { failed: `status ${s.status}` };
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), DEADLINE_MS)));
  try {
    const first = await Promise.race([s.waitFor((f) => f.data?.data?.type === 'assistant_token'), deadline]);
    if (first === 'hung') return { failed: 'no first token' };
    const ms = performance.now() - sent;
    const frames = await Promise.race([s.done, deadline]);
    if (frames === 'hung') return { failed: 'no end_prompt' };
    if (frames.some((f) => f.data?.data?.type === 'error')) return { failed: 'an error frame' };
    return { ms };
  } catch (err) {
    return { failed: String(err) };
  } finally {
    clearTimeout(timer);
    s.close();
  }
}

const results = Object.fromEntries(Object.keys(kinds).map((k) => [k, { ms: [] as number[], failed: [] as string[] }])) as Record<
  Kind,
  { ms: number[]; failed: string[] }
>;
console.log(`${REPLIES} replies of each agent a round, ${ROUNDS} rounds, MCP_TIMEOUT_MS ${values.timeout}`);
for (let round = 1; round <= ROUNDS; round++) {
  for (let i = 0; i < REPLIES; i++) {
    for (const kind of Object.keys(kinds) as Kind[]) {
      const got = await reply(kinds[kind]);
      if ('ms' in got) results[kind].ms.push(got.ms);
      else results[kind].failed.push(got.failed);
    }
  }
  const base = quantile(results.baseline.ms, 0.5);
  console.log(`after round ${round}: first token`);
  for (const kind of Object.keys(kinds) as Kind[]) {
    const { ms, failed } = results[kind];
    const p50 = quantile(ms, 0.5);
    const worst = Math.max(...ms);
    console.log(
      `  ${kind.padEnd(9)} p50 ${p50.toFixed(0).padStart(6)} ms (${(p50 / base).toFixed(2)}×)  worst ${worst.toFixed(0).padStart(6)} ms (${(worst / base).toFixed(1)}×)  failed or unfinished ${failed.length}${failed.length ? ` (${[...new Set(failed)].join(', ')})` : ''}`,
    );
  }
}
await t.close();
await healthy.close();
await stuck.close();
await llm.close();
process.exit(Object.values(results).some((r) => r.failed.length) ? 1 : 0);
