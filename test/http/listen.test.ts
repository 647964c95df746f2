import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { listen, LISTENING_HANDLES } from '../../src/http/listen.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { openRawSocket, type RawSocket } from '../helpers/raw-socket.ts';
import { freePort } from '../helpers/servers.ts';
import { setUp } from '../helpers/set-up.ts';

const opened: FastifyInstance[] = [];
const processes: ChildProcess[] = [];
afterEach(async () => {
  for (const p of processes.splice(0)) p.kill();
  await Promise.all(opened.splice(0).map((app) => app.close()));
});

async function bareService() {
  const app = Fastify();
  app.get('/', async () => 'ok');
  opened.push(app);
  return app;
}

describe('listening', () => {
  it('takes in a burst of connections several per turn of the event loop', async () => {
    const app = await bareService();
    const url = await listen(app, { port: 0, host: '127.0.0.1' });
    const { port } = new URL(url);
    let turn = 0;
    const perTurn = new Map<number, number>();
    app.server.on('connection', () => perTurn.set(turn, (perTurn.get(turn) ?? 0) + 1));
    const count = 64;
    // A client process opens the connections while this event loop is blocked on it, so all of
    // them wait in the kernel's queue, as a burst does behind a busy event loop.
    execFileSync(
      process.execPath,
      [
        '-e',
        `const net = require('node:net'); let n = 0;
       for (let i = 0; i < ${count}; i++) net.connect(${port}, '127.0.0.1', function () { this.destroy(); if (++n === ${count}) process.exit(0); }).on('error', () => process.exit(1));`,
      ],
      { timeout: 10_000 },
    );
    // One tick per turn: connections are accepted in a turn's poll phase, the tick comes after it.
    let ticking = true;
    const tick = () => {
      turn++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    try {
      await expect.poll(() => [...perTurn.values()].reduce((a, b) => a + b, 0), { timeout: 10_000 }).toBe(count);
    } finally {
      ticking = false;
    }
    expect(Math.max(...perTurn.values())).toBeGreaterThan(1);
    expect(perTurn.size).toBeLessThan(count);
  });

  it('makes its handles while clients already connect, and every request is answered', async () => {
    const port = await freePort();
    // Clients that start before the service listens, 20 at a time until 400 have connected: every
    // other one sends a request and reads the answer, the others connect and close at once.
    const clients = spawn(
      process.execPath,
      [
        '-e',
        `const net = require('node:net');
         let connected = 0, requests = 0, answered = 0, running = 0;
         const next = () => {
           if (connected + running >= 400) return running === 0 && (console.log(JSON.stringify({ requests, answered })), process.exit(0));
           running++;
           const socket = net.connect(${port}, '127.0.0.1');
           let data = '', asked = false;
           socket.on('connect', () => {
             connected++;
             if (connected % 2) return socket.destroy();
             asked = true; requests++;
             socket.write('GET / HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n');
           });
           socket.on('data', (d) => (data += d));
           socket.on('error', () => {});
           socket.on('close', () => {
             if (asked && /^HTTP\\/1\\.1 200 /.test(data)) answered++;
             running--;
             setTimeout(next, asked || connected ? 0 : 5);
           });
         };
         for (let i = 0; i < 20; i++) next();
         setTimeout(() => process.exit(3), 20000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    processes.push(clients);
    let out = '';
    clients.stdout.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => clients.once('exit', resolve));
    const app = await bareService();
    const warnings: unknown[] = [];
    await listen(app, { port, host: '127.0.0.1' }, { warn: (obj) => warnings.push(obj) });
    expect(await exited).toBe(0);
    const { requests, answered } = JSON.parse(out) as { requests: number; answered: number };
    expect(requests).toBeGreaterThan(0);
    expect(answered).toBe(requests);
    // Every copy was made: the service says so when it has fewer handles.
    expect(warnings).toEqual([]);
  });

  it('a second service on a port that is taken fails to start instead of sharing it', async () => {
    const first = await bareService();
    const { port } = new URL(await listen(first, { port: 0, host: '127.0.0.1' }));
    const second = await bareService();
    await expect(listen(second, { port: Number(port), host: '127.0.0.1' })).rejects.toMatchObject({ code: 'EADDRINUSE' });
    expect(await (await fetch(`http://127.0.0.1:${port}/`)).text()).toBe('ok');
  });

  it('closed while its handles are being made, it leaves nothing listening on the port', async () => {
    const app = await bareService();
    const warnings: unknown[] = [];
    // Closing starts as soon as the server listens, before the helper can have sent any copy back.
    let closed: Promise<void> | null = null;
    app.addHook('onListen', async () => {
      closed = app.close();
    });
    const { port } = new URL(await listen(app, { port: 0, host: '127.0.0.1' }, { warn: (obj) => warnings.push(obj) }));
    await closed;
    // A copy kept after closing would hold the port: it could not be listened on again.
    const again = createNetServer();
    await new Promise<void>((resolve, reject) => again.once('error', reject).listen(Number(port), '127.0.0.1', resolve));
    await new Promise((resolve) => again.close(resolve));
    expect(warnings).toEqual([]);
  });

  describe('when its helper fails', () => {
    const made: string[] = [];
    afterAll(() => {
      for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
    });

    /**
     * Listens with `program` run as the helper (Node forks the helper with `process.execPath`),
     * then checks what a user sees: requests answered, one warning naming the handles kept, and
     * the port free again once the service has closed.
     */
    async function listenWithHelper(program: string) {
      const app = await bareService();
      const warnings: { handles?: number }[] = [];
      const node = process.execPath;
      process.execPath = program;
      let url: string;
      try {
        url = await listen(app, { port: 0, host: '127.0.0.1' }, { warn: (obj) => warnings.push(obj as { handles?: number }) });
      } finally {
        process.execPath = node;
      }
      const answers = await Promise.all(Array.from({ length: 20 }, () => fetch(url).then((r) => r.text())));
      expect(answers).toEqual(Array(20).fill('ok'));
      await app.close();
      const again = createNetServer();
      await new Promise<void>((resolve, reject) => again.once('error', reject).listen(Number(new URL(url).port), '127.0.0.1', resolve));
      await new Promise((resolve) => again.close(resolve));
      return warnings;
    }

    it('that cannot start, it listens on its one handle and says so', async () => {
      const warnings = await listenWithHelper('/nonexistent/node');
      expect(warnings).toMatchObject([{ handles: 1 }]);
    });

    it('that dies after sending back some copies, it keeps those and says so', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'parley-listen-'));
      made.push(dir);
      // A helper that hands back three copies, as the real one does, and then exits.
      const program = join(dir, 'helper');
      writeFileSync(
        program,
        `#!/bin/sh\nexec '${process.execPath}' -e "let asked = 0, sent = 0; process.on('message', (m, h) => { if (++asked > 3) return; process.send('copy', h, () => { h.close(); if (++sent === 3) process.exit(3); }); });"\n`,
        { mode: 0o755 },
      );
      const warnings = await listenWithHelper(program);
      expect(warnings).toMatchObject([{ handles: 4 }]);
    });
  });
});

describe('closing', () => {
  let t: TestApp;
  let alice: TestUser;
  let agentId: string;
  let closing: Promise<void> | null = null;
  setUp(async (start) => {
    t = await start.app();
    alice = await t.createUser('alice');
    agentId = (await fixtures(t).agent(alice, { name: 'Muse' })).id;
  });

  it('waits for the requests in flight on every listening handle before it closes', async () => {
    const body = JSON.stringify({ agent_ids: [agentId] });
    const head = `POST /v2/sessions/create HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\nx-api-key: ${alice.apiKey}\r\ncontent-length: ${body.length}\r\n\r\n`;
    let arrived = 0;
    let answered = 0;
    t.app.http.server.on('request', (_request, response) => {
      arrived++;
      response.once('finish', () => answered++);
    });
    // More connections than listening handles, so that every handle likely takes in some.
    const sockets: RawSocket[] = await Promise.all(
      Array.from({ length: 4 * LISTENING_HANDLES }, async () => {
        const s = await openRawSocket(t.url);
        s.socket.write(head + body.slice(0, 5));
        return s;
      }),
    );
    // What had been answered when the database began to close (the real close runs after).
    let answeredBeforeDatabaseClosed = -1;
    const { database } = t.app;
    const closeDatabase = database.close.bind(database);
    database.close = () => {
      answeredBeforeDatabaseClosed = answered;
      return closeDatabase();
    };
    // Requests whose headers have arrived are in flight; a connection that sent nothing yet is idle.
    await expect.poll(() => arrived, { timeout: 10_000 }).toBe(sockets.length);
    // Some connections are the server's own handle's, the others its copies'.
    const ownConnections = await new Promise<number>((resolve, reject) =>
      t.app.http.server.getConnections((e, n) => (e ? reject(e) : resolve(n))),
    );
    expect(ownConnections).toBeGreaterThan(0);
    expect(ownConnections).toBeLessThan(sockets.length);
    closing = t.close();
    // The server stops accepting once the application's own closing steps are done.
    await expect.poll(() => t.app.http.server.listening, { timeout: 10_000 }).toBe(false);
    // One at a time, last opened first: in a turn the server's own handle takes in after its
    // copies, so its connections are answered early, while most of the copies' still wait.
    for (const s of [...sockets].reverse()) {
      s.socket.write(body.slice(5));
      await expect.poll(s.received, { timeout: 10_000 }).toMatch(/^HTTP\/1\.1 /);
    }
    await closing;
    // The database closed only once every request in flight was answered, whichever handle took it in.
    expect(answeredBeforeDatabaseClosed).toBe(sockets.length);
    const answers = await Promise.all(sockets.map((s) => s.closed));
    for (const answer of answers) expect(answer).toMatch(/^HTTP\/1\.1 201 /);
  });
});
