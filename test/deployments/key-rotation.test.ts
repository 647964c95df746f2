import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { expect, it } from 'vitest';
import { sealerOver } from '../../src/secrets/keyring.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { type FakeTelegram, startFakeTelegram } from '../helpers/fake-telegram.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { setUp } from '../helpers/set-up.ts';
import { until } from '../helpers/until.ts';

/**
 * The key kept in the data directory rotated while owners deploy: a deploy has checked its
 * token and is about to store it, sealed, when the rotation makes a new key, reseals every row
 * and forgets the old key. The deploy's write is held back (another connection locks the table
 * against writes) until the rotation is over, so that interleaving happens every time. On
 * PostgreSQL, which another connection can share (a throwaway cluster without CI's server).
 */
let t: TestApp;
let tg: FakeTelegram;
let alice: TestUser;
let keyFile: string;
let url: string;

setUp(async (start) => {
  const dir = await start.service(mkdtemp(join(tmpdir(), 'parley-keys-')), (d) => rm(d, { recursive: true, force: true }));
  keyFile = join(dir, 'secrets.key');
  const database = await start.service(freshPostgresDatabase(), (d) => d.drop());
  url = database.url;
  tg = await start.service(startFakeTelegram());
  t = await start.app(
    {
      secrets: { key: undefined, previous: [], keyFile, shared: false },
      deployments: { leaseMs: 1_500, telegram: { apiUrl: tg.apiUrl, pollTimeoutS: 1 } },
    },
    { kind: 'postgres', url },
  );
  alice = await t.createUser('alice');
});

/** The ids of the deployments no key in the key file opens. */
async function unopened() {
  const keys = (await readFile(keyFile, 'utf8')).trim().split('\n');
  const sealer = sealerOver({ list: keys.map((k) => Buffer.from(k, 'base64')) });
  const rows = await t.db.deployment.findMany({ select: { id: true, secrets: true } });
  return rows.flatMap(({ id, secrets }) => {
    try {
      sealer.open((secrets as { sealed: string }).sealed, id);
      return [];
    } catch {
      return [id];
    }
  });
}

it('a deploy stored after a rotation forgot the key it was about to seal under still opens, new or changed', async () => {
  const [fresh, kept] = await Promise.all([fixtures(t).agent(alice, { public: false }), fixtures(t).agent(alice, { public: false })]);
  const deploy = (agentId: string) =>
    t.rest('POST', `/v2/agents/${agentId}/deployments`, {
      key: alice.apiKey,
      body: { platform: 'telegram', secrets: { telegram: { token: tg.addBot() } } },
    });
  expect((await deploy(kept.id)).status).toBe(200);

  const holder = new pg.Client({ connectionString: url });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    // Reads go on (the rotation's); writes to deployments wait until this transaction ends.
    await holder.query('LOCK TABLE "Deployment" IN SHARE ROW EXCLUSIVE MODE');
    const deploys = [deploy(fresh.id), deploy(kept.id)];
    await until('both deploys to wait for their write', async () => {
      const [row] = await t.db.$queryRaw<{ waiting: number }[]>`
        SELECT count(*)::int AS "waiting" FROM pg_locks WHERE NOT granted AND relation = '"Deployment"'::regclass`;
      return row!.waiting >= 2;
    });
    const rotating = t.services.deployments.rotateKey();
    // The kept deployment's reseal waits for the lock too: the rotation finishes once it is let go.
    await until('the rotation to have made its new key', async () => (await readFile(keyFile, 'utf8')).trim().split('\n').length === 2);
    await holder.query('COMMIT');
    expect((await Promise.all(deploys)).map((r) => r.status)).toEqual([200, 200]);
    expect((await rotating).unreadable).toEqual([]);
  } finally {
    await holder.end();
  }
  expect((await readFile(keyFile, 'utf8')).trim().split('\n')).toHaveLength(1);
  expect(await unopened()).toEqual([]);
});
