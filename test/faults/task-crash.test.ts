import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { SERVER_STOPPED } from '../../src/domain/tasks/runner.ts';
import { apiClient } from '../helpers/api-client.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { freshDatabaseEnv, runCli, startServerProcess, type ServerProcess } from '../helpers/process.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';

/**
 * A server process killed with SIGKILL while one task runs (its tool service never answers) and
 * another waits for its turn, then started again on the same data: both end failed, their holds
 * come back exactly once, and the task that had completed keeps its charge.
 */
describe('SIGKILL while tasks hold manna', () => {
  let db: Awaited<ReturnType<typeof freshDatabaseEnv>>;
  let databaseConfig: DatabaseConfig;
  let tools: Awaited<ReturnType<typeof startFakeToolService>>;
  let env: Record<string, string>;
  let server: ServerProcess;
  let alice: ReturnType<typeof apiClient>;
  const ids: Record<'done' | 'running' | 'waiting', string> = { done: '', running: '', waiting: '' };

  beforeAll(async () => {
    db = await freshDatabaseEnv();
    databaseConfig = db.env.DATABASE_URL ? { kind: 'postgres', url: db.env.DATABASE_URL } : { kind: 'pglite', dataDir: db.env.DATA_DIR! };
    tools = await startFakeToolService({ hang: true });
    tools.enqueue({ answer: { result: { made: true } } });
    const toolsDir = await toolRegistryWith({ paid_tool: httpTool('paid_tool', tools.url, 'n') });
    // One turn per user: the second task waits in the queue when the process dies.
    env = { ...db.env, TOOLS_DIR: toolsDir, TOOL_RUNS_PER_USER: '1' };
    const key = await runCli(['keys', 'create', 'alice', '--json'], env);
    await runCli(['manna', 'grant', 'alice', '10'], env);
    alice = apiClient(() => server.url, JSON.parse(key.stdout).apiKey);
    server = await startServerProcess(env);
    await server.waitFor(/listening on/);
  });
  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await tools?.close();
    await db?.drop();
  });

  const task = async (id: string) => (await alice.rest('GET', `/v2/tasks/${id}`)).body.task;

  it('is killed with a task running and one waiting', async () => {
    const create = async (n: number) =>
      (await alice.rest('POST', '/v2/tasks/create', { tool: 'paid_tool', args: { prompt: 'x', n } })).body.task._id;
    ids.done = await create(1);
    await expect.poll(async () => (await task(ids.done)).status).toBe('completed');
    ids.running = await create(2);
    await expect.poll(() => tools.calls.length).toBe(2);
    ids.waiting = await create(3);
    expect((await task(ids.running)).status).toBe('running');
    expect((await task(ids.waiting)).status).toBe('pending');
    expect((await alice.rest('GET', '/v2/creators/me')).body.balance).toBe(4);
    server.child.kill('SIGKILL');
    await server.exited;
  });

  /** A start of the server on the same data, then its stop: what it found is in its output. */
  async function startAndStop(expectOutput: (output: string) => void) {
    server = await startServerProcess(env);
    await server.waitFor(/listening on/);
    expectOutput(server.output());
    expect(server.output()).not.toMatch(/"level":(50|60)/);
    expect(await task(ids.running)).toMatchObject({ status: 'failed', error: SERVER_STOPPED });
    expect(await task(ids.waiting)).toMatchObject({ status: 'failed', error: SERVER_STOPPED });
    expect(await task(ids.done)).toMatchObject({ status: 'completed' });
    expect((await alice.rest('GET', '/v2/creators/me')).body.balance).toBe(9);
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  }

  // One start per test: under load a server's start-up takes a good part of a test's time.
  it('starts again and settles them as failed, their holds given back', async () => {
    await startAndStop((output) => expect(output).toMatch(/2 tasks left unfinished by a stopped process were settled as failed/));
  });

  it('a second start changes nothing: each hold came back exactly once', async () => {
    await startAndStop((output) => expect(output).not.toMatch(/tasks left unfinished/));
    const database = await openDatabase(databaseConfig);
    try {
      const ledger = await database.prisma.mannaLedger.findMany({ where: { taskId: { in: Object.values(ids) } } });
      const net = (id: string) => ledger.filter((r) => r.taskId === id).reduce((sum, r) => sum + r.amount.toNumber(), 0);
      expect([net(ids.done), net(ids.running), net(ids.waiting)]).toEqual([-1, 0, 0]);
      expect(
        ledger
          .filter((r) => r.amount.isPositive())
          .map((r) => r.reason)
          .sort(),
      ).toEqual(['refund: paid_tool failed', 'refund: paid_tool failed']);
    } finally {
      await database.close();
    }
  });
});
