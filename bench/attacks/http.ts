// Replays the hostile-client attacks of docs/security.md against a real server process on
// loopback and reports what the server went through (its memory, /healthz latency on fresh
// connections during the attack) and what the attacker saw. Every attack is bounded in sockets,
// requests and seconds, and stops by itself.
//   npx tsx bench/attacks/http.ts [--root <checkout> --nofile 1024 --sockets 1200 --seconds 45 --only slow-graphql-body,slow-rest-body,inputs]
// `--root` runs another checkout (with its node_modules) to compare before and after a change;
// `--nofile` is the server's soft open-file limit, small so that exhausting it takes few sockets.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort } from '../../test/helpers/servers.ts';

const { values } = parseArgs({
  options: {
    root: { type: 'string', default: '.' },
    nofile: { type: 'string', default: '1024' },
    sockets: { type: 'string', default: '1200' },
    seconds: { type: 'string', default: '45' },
    only: { type: 'string' },
  },
});
const root = resolve(values.root);
const sockets = Number(values.sockets);
const seconds = Number(values.seconds);
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function startServer() {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: mkdtempSync(join(tmpdir(), 'parley-attack-')),
    LOG_LEVEL: 'warn',
    PORT: String(await freePort()),
    HOST: '127.0.0.1',
  };
  delete env.DATABASE_URL;
  const cli = (args: string[]) =>
    execFileSync(process.execPath, [join(root, 'bin/parley.js'), ...args], { cwd: root, env, encoding: 'utf8' });
  const keys = ['attacker', 'victim'].map((name) => JSON.parse(cli(['keys', 'create', name, '--json'])).apiKey as string);
  const child = spawn('sh', ['-c', `ulimit -n ${values.nofile} && exec "${process.execPath}" --import tsx src/server.ts`], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout.on('data', (d) => (log += d));
  child.stderr.on('data', (d) => (log += d));
  const url = `http://127.0.0.1:${env.PORT}`;
  for (let i = 0; i < 300 && !/listening/.test(log); i++) await pause(100);
  return {
    url,
    keys,
    rssMb: () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]) / 1024,
    stop: () => child.kill('SIGKILL'),
  };
}

/** GET /healthz on a new connection: its latency in ms, or why it failed. */
async function health(url: string): Promise<number | string> {
  const started = performance.now();
  try {
    const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(3_000), headers: { connection: 'close' } });
    await res.text();
    return res.status === 200 ? Math.round(performance.now() - started) : `status ${res.status}`;
  } catch (e) {
    return (e as Error).name === 'TimeoutError' ? 'no answer in 3 s' : 'refused';
  }
}

const summarize = (samples: (number | string)[]) => {
  const times = samples.filter((s): s is number => typeof s === 'number').sort((a, b) => a - b);
  const failures = samples.filter((s) => typeof s === 'string');
  const reasons = [...new Set(failures)].map((r) => `${failures.filter((f) => f === r).length}× ${r}`);
  return `${times.length}/${samples.length} answered${times.length ? `, median ${times[times.length >> 1]} ms, max ${times.at(-1)} ms` : ''}${reasons.length ? `; ${reasons.join(', ')}` : ''}`;
};

/** Opens `count` sockets that each send `head` and then a byte every 5 s, watching the server meanwhile. */
async function slowBodies(name: string, head: (i: number) => string) {
  const server = await startServer();
  const outcomes = new Map<string, number>();
  const open = new Set<Socket>();
  const timers: NodeJS.Timeout[] = [];
  const started = performance.now();
  const closedAt: number[] = [];
  let letGo = false;
  for (let i = 0; i < sockets; i++) {
    const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
    let reply = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (reply += d));
    socket.on('error', () => {});
    socket.on('connect', () => {
      open.add(socket);
      socket.write(head(i));
      timers.push(setInterval(() => socket.writable && socket.write('{'), 5_000));
    });
    socket.on('close', () => {
      open.delete(socket);
      if (letGo) return;
      closedAt.push(performance.now() - started);
      const status = /^HTTP\/1\.1 (\d{3})/.exec(reply)?.[1];
      const outcome = status ? `answered ${status}` : 'closed without an answer';
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
    });
    if (i % 100 === 99) await pause(10);
  }
  const healthz: (number | string)[] = [];
  const rss: number[] = [server.rssMb()];
  const deadline = performance.now() + seconds * 1_000;
  while (performance.now() < deadline) {
    healthz.push(await health(server.url));
    rss.push(server.rssMb());
    await pause(1_000);
  }
  const stillOpen = open.size;
  letGo = true;
  for (const t of timers) clearInterval(t);
  for (const s of open) s.destroy();
  await pause(500);
  const after = await health(server.url);
  console.log(`\n## ${name} (${sockets} sockets, ${seconds} s, server open-file limit ${values.nofile})`);
  console.log(`server memory: ${Math.round(rss[0]!)} MB before, at most ${Math.round(Math.max(...rss))} MB during`);
  console.log(`/healthz on new connections during the attack: ${summarize(healthz)}`);
  console.log(`attacker: ${[...outcomes].map(([o, n]) => `${n} ${o}`).join(', ') || 'nothing closed'}; ${stillOpen} still open at the end`);
  if (closedAt.length)
    console.log(
      `attacker sockets closed by the server: first after ${Math.round(Math.min(...closedAt) / 1000)} s, last after ${Math.round(Math.max(...closedAt) / 1000)} s`,
    );
  console.log(`/healthz once the attacker let go: ${typeof after === 'number' ? `${after} ms` : after}`);
  server.stop();
}

/** Requests one user with a key can make; prints what each answered. */
async function inputs() {
  const server = await startServer();
  const [attacker] = server.keys;
  const gql = async (query: string, variables: Record<string, unknown> = {}) => {
    const res = await fetch(`${server.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': attacker! },
      body: JSON.stringify({ query, variables }),
    });
    return (await res.json()) as { data?: any; errors?: { message: string; extensions?: { code?: string } }[] };
  };
  const describe = (r: { data?: any; errors?: { message: string; extensions?: { code?: string } }[] }) =>
    r.errors ? `${r.errors[0]!.extensions?.code ?? '(no code)'} ${JSON.stringify(r.errors[0]!.message)}` : 'accepted';
  console.log('\n## input attacks (one user with a key)');
  const create = 'mutation($i: CreateAgentInput!) { createAgent(input: $i) { id key } }';
  const agent = (await gql(create, { i: { name: 'Bob', key: 'bob-agent' } })).data.createAgent;
  const patch = async (body: string) => {
    const res = await fetch(`${server.url}/v2/agents/${agent.id}`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json', 'x-api-key': attacker! },
      body,
    });
    return `${res.status} ${await res.text()}`;
  };
  console.log(`PATCH image javascript: → ${await patch('{"image":"javascript:alert(document.domain)","public":true}')}`);
  console.log(`PATCH tools.constructor → ${await patch('{"tools":{"constructor":true}}')}`);
  console.log(`PATCH key VICTIM (another user's name in capitals) → ${await patch('{"key":"VICTIM"}')}`);
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  for (const cursor of ['GPC:N:1', 'GPC:D:notadate', 'GPC:J:{"id":"x"}']) {
    console.log(
      `me.agents(after: base64(${cursor})) → ${describe(await gql('query($c: String) { me { agents(first: 1, after: $c) { edges { cursor } } } }', { c: b64(cursor) }))}`,
    );
  }
  console.log(`me.agents(first: -1) → ${describe(await gql('{ me { agents(first: -1) { edges { cursor } } } }'))}`);
  console.log(
    `variable with a misspelt field → ${describe(await gql('mutation($i: UpdateAgentInput!) { updateAgent(id: "x", input: $i) { id } }', { i: { personna: 'x' } }))}`,
  );
  let created = 1;
  let last = '';
  const started = performance.now();
  for (; created < 300; created++) {
    const r = await gql(create, { i: { name: `Squat ${created}`, key: `squat-${created}` } });
    if (r.errors) {
      last = describe(r);
      break;
    }
  }
  console.log(
    `agents created in a loop of up to 300: ${created} in ${((performance.now() - started) / 1000).toFixed(1)} s${last ? `, then ${last}` : ''}`,
  );
  server.stop();
}

const scenarios: Record<string, () => Promise<void>> = {
  'slow-graphql-body': () =>
    slowBodies(
      'POST /graphql without a key, body one byte every 5 s',
      () => 'POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n',
    ),
  'slow-rest-body': () =>
    slowBodies(
      'PATCH /v2/agents/:id without a key, body one byte every 5 s',
      () => 'PATCH /v2/agents/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n',
    ),
  inputs,
};

for (const [name, run] of Object.entries(scenarios)) if (!values.only || values.only.split(',').includes(name)) await run();
process.exit(0);
