import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onRealPostgres } from '../helpers/database.ts';
import { freshDatabaseEnv, runCli, runCliProcess, startServerProcess } from '../helpers/process.ts';

/**
 * The CLI and the server as a user runs them: separate processes over the same database, so
 * this also proves that data written by one survives into the next. The commands whose output
 * is checked in detail run as the functions they are, in this process (`runCli`); help, migrate
 * and the key the server is then started with run as `npx parley` does (`runCliProcess`).
 */
describe('parley CLI and server process', () => {
  let db: Awaited<ReturnType<typeof freshDatabaseEnv>>;
  let firstManifest: any;
  let secondManifest: any;

  beforeAll(async () => {
    db = await freshDatabaseEnv();
  });
  afterAll(() => db.drop());

  it('prints help for every command', async () => {
    for (const args of [[], ['--help'], ['keys', '--help'], ['demo', '--help'], ['migrate', '--help'], ['serve', '--help']]) {
      const { code, stdout } = await runCliProcess(args, db.env);
      expect(code, `parley ${args.join(' ')}`).toBe(0);
      expect(stdout).toMatch(/^Usage: parley/);
    }
    const wrong = await runCliProcess(['frobnicate'], db.env);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain('Unknown command "frobnicate"');
  });

  it("migrate applies the migrations once (a new embedded database starts from the build's migrated snapshot)", async () => {
    const first = await runCliProcess(['migrate'], db.env);
    expect(first.code).toBe(0);
    if (onRealPostgres()) expect(first.stdout).toMatch(/applied: \d+_init/);
    else
      expect(first.stdout).toBe(
        "new database: copied from the build's snapshot, which has the migrations up to it\ndatabase is up to date\n",
      );
    const second = await runCliProcess(['migrate'], db.env);
    expect(second.stdout.trim()).toBe('database is up to date');
  });

  it('demo --json prints exactly one JSON manifest, and a second run adds nothing', async () => {
    const first = await runCli(['demo', '--json'], db.env);
    expect(first.code, first.stderr).toBe(0);
    firstManifest = JSON.parse(first.stdout);
    expect(firstManifest.users.map((u: any) => u.username)).toEqual(['alice', 'bob']);
    for (const u of firstManifest.users)
      expect(u).toEqual({ id: expect.any(String), username: expect.any(String), apiKey: expect.stringMatching(/^pk_/) });
    expect(firstManifest.agents.map((a: any) => a.owner).sort()).toEqual(expect.arrayContaining(['alice', 'bob']));
    for (const a of firstManifest.agents) expect(a).toEqual({ id: expect.any(String), key: expect.any(String), owner: expect.any(String) });
    expect(firstManifest.concepts).toEqual([{ id: expect.any(String), owner: 'alice' }]);
    expect(firstManifest.models.map((m: any) => m.public).sort()).toEqual([false, true]);
    expect(firstManifest.creations.length).toBeGreaterThanOrEqual(200);
    expect(new Set(firstManifest.creations.map((c: any) => c.public))).toEqual(new Set([true, false]));
    expect(firstManifest.shares).toEqual([{ share_id: expect.any(String), owner: 'alice' }]);
    expect(firstManifest.sessions.some((s: any) => s.owner === 'alice' && s.sharedWith.includes('bob'))).toBe(true);

    const second = await runCli(['demo', '--json'], db.env);
    expect(second.code, second.stderr).toBe(0);
    secondManifest = JSON.parse(second.stdout);
    const { users: u1, ...rest1 } = firstManifest;
    const { users: u2, ...rest2 } = secondManifest;
    expect(rest2).toEqual(rest1);
    expect(u2.map((u: any) => u.id)).toEqual(u1.map((u: any) => u.id));
    expect(u2[0].apiKey).not.toBe(u1[0].apiKey);
  });

  it("keys create refuses a bad name, an unknown option, an agent's key, and another user's name in other letters (such a key would act as someone else)", async () => {
    const agentKey = secondManifest.agents[0].key;
    // The first two are refused before a database is opened, so they run beside the others; those
    // open the embedded database, which one process holds at a time.
    const opening = async () => {
      const forAgent = await runCli(['keys', 'create', agentKey], db.env);
      return [forAgent, await runCli(['keys', 'create', 'ALICE'], db.env)] as const;
    };
    const [bad, unknownOption, [forAgent, lookAlike]] = await Promise.all([
      runCli(['keys', 'create', 'not valid!'], db.env),
      runCli(['keys', 'create', '-x'], db.env),
      opening(),
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/must be/);
    expect(bad.stderr).not.toMatch(/\n\s+at |errors\.ts/);
    expect(unknownOption.code).toBe(2);
    expect(unknownOption.stderr).toMatch(/^Unknown option '-x'/);
    expect(unknownOption.stderr).not.toMatch(/^\s+at .*[(:]\d+/m);
    expect(forAgent.code).toBe(1);
    expect(forAgent.stderr.trim()).toBe(`"${agentKey}" is an agent's key, not a user: API keys are made for users only`);
    expect(lookAlike.code).toBe(1);
    expect(lookAlike.stderr.trim()).toBe('The username "alice" already exists (usernames are the same regardless of case)');
  });

  it('keys create makes a user whose key works against the server started afterwards', async () => {
    const created = await runCliProcess(['keys', 'create', 'carol', '--json'], db.env);
    expect(created.code, created.stderr).toBe(0);
    const { apiKey, username } = JSON.parse(created.stdout);
    expect(username).toBe('carol');

    const server = await startServerProcess(db.env);
    try {
      await server.waitFor(/parley listening on http:\/\/127\.0\.0\.1:\d+.*\ndatabase: /);
      expect(server.output()).toMatch(/database: (embedded PGlite in \/|PostgreSQL at )/);
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);

      // While the server runs: on PostgreSQL the CLI shares the database, on the embedded one it
      // asks the server (test/cli/command-socket.test.ts); either way the key works at once.
      const concurrent = await runCli(['keys', 'create', 'dave', '--json'], db.env);
      expect(concurrent.code, concurrent.stderr).toBe(0);
      const dave = await fetch(`${server.url}/v2/creators/me`, { headers: { 'x-api-key': JSON.parse(concurrent.stdout).apiKey } });
      expect(dave.status).toBe(200);

      const me = await fetch(`${server.url}/v2/creators/me`, { headers: { 'x-api-key': apiKey } });
      expect(me.status).toBe(200);
      expect((await me.json()).creator.username).toBe('carol');

      // Demo data written by the CLI is there, once: alice's creations are not doubled.
      const alice = secondManifest.users[0];
      const aliceCreations = secondManifest.creations.filter((c: any) => c.owner === 'alice').length;
      const page = async (after: string | null) => {
        const response = await fetch(`${server.url}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': alice.apiKey },
          body: JSON.stringify({
            query:
              'query Page($after: String) { me { creations(first: 100, after: $after) { edges { node { id } } pageInfo { hasNextPage endCursor } } } }',
            variables: { after },
          }),
        });
        return (await response.json()).data.me.creations;
      };
      const seen: string[] = [];
      for (let after: string | null = null, more = true; more; ) {
        const { edges, pageInfo } = await page(after);
        seen.push(...edges.map((e: any) => e.node.id));
        [after, more] = [pageInfo.endCursor, pageInfo.hasNextPage];
      }
      expect(new Set(seen).size).toBe(aliceCreations);
      expect(seen).toHaveLength(aliceCreations);
      // The key from the first demo run was not revoked by the second.
      const oldKey = await fetch(`${server.url}/v2/creators/me`, { headers: { 'x-api-key': firstManifest.users[0].apiKey } });
      expect(oldKey.status).toBe(200);

      // SIGTERM while a request is in flight: it still gets its answer, then the process exits 0.
      const sentAt = server.output().length;
      const inFlight = fetch(`${server.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': alice.apiKey },
        body: JSON.stringify({
          query: '{ me { creations(first: 100) { edges { node { id name creator { username } tool { name } } } } } }',
        }),
      });
      await server.waitFor(/"url":"\/graphql".*"msg":"incoming request"/, { since: sentAt });
      server.child.kill('SIGTERM');
      const answered = await inFlight;
      expect(answered.status).toBe(200);
      expect((await answered.json()).data.me.creations.edges).toHaveLength(100);
      expect(await server.exited).toBe(0);
    } finally {
      server.child.kill('SIGKILL');
    }
  });

  it('refuses to start with a broken tool file, naming the file and the field', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'parley-tools-'));
    await writeFile(
      join(dir, 'broken.yaml'),
      'key: broken\nname: Broken\ndescription: x\noutput_type: hologram\norder: 1\ncost_estimate: "1"\nparameters:\n  - {name: prompt, type: string, description: p}\n',
    );
    const server = await startServerProcess({ ...db.env, TOOLS_DIR: dir });
    expect(await server.exited).toBe(1);
    expect(server.output()).toMatch(/broken\.yaml: output_type: /);
  });
});
