import { copyFile, readFile, stat } from 'node:fs/promises';
import { expect, it } from 'vitest';
import type { DatabaseConfig, SecretsConfig } from '../../src/config.ts';
import type { ConfigOverrides, TestApp, TestUser } from '../helpers/app.ts';
import { type FakeTelegram, startFakeTelegram } from '../helpers/fake-telegram.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { literally, movedKeys, secrets, startedOn } from '../helpers/moved-keys.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * A deployment's data moved without the key its secrets are sealed with (a restore into a new
 * data directory, a copy to PostgreSQL without SECRETS_KEY, a start with another key) cannot
 * run, and says so wherever it is shown: not running, with why and what to do. A start makes no
 * new key beside secrets sealed with another. Once the key is given, it runs again by itself.
 * The apps are the real one, one after the other on one database, each with the key it is given.
 */
let tg: FakeTelegram;
let database: DatabaseConfig;
let alice: TestUser;
let token: string;
let agentId: string;
let sealedIn: string;
let elsewhere: string;

const withTelegram = (s: SecretsConfig): ConfigOverrides => ({
  secrets: s,
  deployments: { leaseMs: 1_500, telegram: { apiUrl: tg.apiUrl, pollTimeoutS: 1 } },
});

/** Runs `check` on an app started with `s`, then closes it (also when `check` fails). */
const startedWith = <T>(s: SecretsConfig, check: (t: TestApp) => Promise<T>) => startedOn(database, withTelegram(s), check);

/** The deployment as REST (operation 15) and GraphQL show it to its owner. */
async function shown(t: TestApp) {
  const rest = await t.rest('GET', '/v2/agents/deployments', { key: alice.apiKey });
  expect(rest.status).toBe(200);
  const gql = await t.rest('POST', '/graphql', { key: alice.apiKey, body: { query: '{ deployments { state valid lastError } }' } });
  expect(gql.body.errors).toBeUndefined();
  const [r] = rest.body.deployments;
  expect(gql.body.data.deployments).toEqual([{ state: r.state.toUpperCase(), valid: r.valid, lastError: r.last_error }]);
  return { state: r.state, valid: r.valid, last_error: r.last_error };
}

setUp(async (start) => {
  tg = await start.service(startFakeTelegram());
  ({ database, sealedIn, elsewhere } = await movedKeys(start));
  // Deployed where the key was made, running there.
  await startedWith(secrets({ keyFile: sealedIn }), async (t) => {
    alice = await t.createUser('alice');
    agentId = (await fixtures(t).agent(alice, { public: false })).id;
    token = tg.addBot();
    const res = await t.rest('POST', `/v2/agents/${agentId}/deployments`, {
      key: alice.apiKey,
      body: { platform: 'telegram', secrets: { telegram: { token } } },
    });
    expect(res.status).toBe(200);
    await tg.until(() => tg.polling(token).now === 1, 20_000, 'the deployment to poll');
    expect(await shown(t)).toEqual({ state: 'running', valid: true, last_error: null });
  });
});

it('moved into a data directory without its key: not running, saying the key is missing, and no new key is made', async () => {
  await startedWith(secrets({ keyFile: elsewhere }), async (t) => {
    expect(await shown(t)).toEqual({
      state: 'stopped',
      valid: true,
      last_error: expect.stringMatching(
        new RegExp(
          `^Not running: ${literally(elsewhere)} is missing, and the secrets of 1 deployment with key id [\\w-]{12} are sealed with the key it held: copy the secrets\\.key`,
        ),
      ),
    });
    // Deploying anew needs a key: it is refused with the same words.
    const refused = await t.rest('POST', `/v2/agents/${agentId}/deployments`, {
      key: alice.apiKey,
      body: { platform: 'telegram', secrets: { telegram: { token } } },
    });
    expect(refused.status).toBe(503);
    expect(JSON.stringify(refused.body)).toContain('is missing, and the secrets of 1 deployment');
  });
  await expect(stat(elsewhere)).rejects.toThrow(/ENOENT/);
});

it('started with another key: not running, naming the key its secrets are sealed with', async () => {
  const key = Buffer.alloc(32, 7);
  await startedWith(secrets({ key }), async (t) => {
    expect(await shown(t)).toEqual({
      state: 'stopped',
      valid: true,
      last_error: expect.stringMatching(
        /^Not running: the secrets were sealed with a key this service does not have \(key id [\w-]{12}\): start the service with that key, or deploy it again with its token$/,
      ),
    });
  });
});

it('on a shared database without SECRETS_KEY: not running, saying which key to set', async () => {
  await startedWith(secrets({ shared: true }), async (t) => {
    expect(await shown(t)).toEqual({
      state: 'stopped',
      valid: true,
      last_error: expect.stringMatching(
        /^Not running: SECRETS_KEY is not set, and the secrets of 1 deployment with key id [\w-]{12} are sealed with a key: set SECRETS_KEY/,
      ),
    });
  });
});

it('given its key again (the data directory’s key file, or SECRETS_KEY), it runs by itself', async () => {
  await copyFile(sealedIn, elsewhere);
  await startedWith(secrets({ keyFile: elsewhere }), async (t) => {
    await tg.until(() => tg.polling(token).now === 1, 20_000, 'the deployment to poll again');
    expect(await shown(t)).toEqual({ state: 'running', valid: true, last_error: null });
  });
  const key = Buffer.from((await readFile(sealedIn, 'utf8')).trim(), 'base64');
  await startedWith(secrets({ key, shared: true }), async (t) => {
    await tg.until(() => tg.polling(token).now === 1, 20_000, 'the deployment to poll on SECRETS_KEY');
    expect(await shown(t)).toEqual({ state: 'running', valid: true, last_error: null });
  });
});
