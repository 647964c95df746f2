import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabaseEnv, runCli } from '../helpers/process.ts';

describe('parley manna grant', () => {
  let db: Awaited<ReturnType<typeof freshDatabaseEnv>>;
  beforeAll(async () => {
    db = await freshDatabaseEnv();
    expect((await runCli(['keys', 'create', 'dora'], db.env)).code).toBe(0);
  });
  afterAll(() => db.drop());

  it('adds forever manna by default, subscription manna with --subscription, each with a ledger row', async () => {
    const forever = await runCli(['manna', 'grant', 'dora', '12.5', '--json'], db.env);
    expect(forever.code, forever.stderr).toBe(0);
    expect(JSON.parse(forever.stdout)).toEqual({
      ledgerId: expect.any(String),
      amount: 12.5,
      kind: 'forever',
      subscriptionBalance: 0,
      foreverBalance: 12.5,
    });
    const subscription = await runCli(['manna', 'grant', 'dora', '3', '--subscription'], db.env);
    expect(subscription.code, subscription.stderr).toBe(0);
    expect(subscription.stdout.trim()).toBe('Granted 3 subscription manna to dora: balance 15.5 (subscription 3, forever 12.5).');
  });

  it('refuses bad amounts, unknown users and incomplete commands, clearly', async () => {
    for (const [args, code, text] of [
      [['manna', 'grant', 'dora', 'lots'], 1, /must be a positive amount/],
      [['manna', 'grant', 'dora', '-5'], 2, /^Unknown option '-5'/],
      [['manna', 'grant', 'dora', '0'], 1, /must be more than 0/],
      [['manna', 'grant', 'dora', '1.23456'], 1, /at most 4 decimals/],
      [['manna', 'grant', 'nobody', '1'], 1, /No user named "nobody"/],
      [['manna', 'grant', 'dora'], 2, /^Usage: parley manna grant/],
    ] as const) {
      const run = await runCli([...args], db.env);
      expect({ args, code: run.code }).toEqual({ args, code });
      expect(run.stderr).toMatch(text);
      expect(run.stderr).not.toMatch(/\n\s+at /);
    }
  });
});
