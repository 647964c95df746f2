import { describe, expect, it } from 'vitest';
import { credit } from '../../src/domain/manna/stores/ledger.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { expectRejectsBadKeys, isoDate } from '../helpers/rest-helpers.ts';
import { setUp } from '../helpers/set-up.ts';

describe('GET /v2/creators/me', () => {
  let t: TestApp;
  let alice: TestUser;

  setUp(async (start) => {
    t = await start.app();
    alice = await t.createUser('alice');
  });

  const me = async (user: TestUser) => {
    const res = await t.rest('GET', '/v2/creators/me', { key: user.apiKey });
    expect(res.status).toBe(200);
    return res.body;
  };

  it('answers 401 {error} for missing, malformed and unknown keys', async () => {
    expect(await expectRejectsBadKeys(t, 'GET', '/v2/creators/me')).toBe(true);
  });

  it('returns my profile with numeric balances', async () => {
    const res = await t.rest('GET', '/v2/creators/me', { key: alice.apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      balance: 0,
      subscriptionBalance: 0,
      foreverBalance: 0,
      creator: {
        _id: alice.id,
        id: alice.id,
        userId: alice.id,
        username: 'alice',
        userImage: null,
        type: 'user',
        subscriptionTier: 0,
        subscriptionTierName: 'free',
        featureFlags: [],
        createdAt: isoDate,
        updatedAt: isoDate,
      },
    });
  });

  it("is scoped to the caller: another user's key shows that user", async () => {
    const bob = await t.createUser('bob');
    const body = await me(bob);
    expect(body.creator.id).toBe(bob.id);
    expect(body.creator.username).toBe('bob');
  });

  it('shows exact decimal balances after credits, balance = subscription + forever, one ledger row per move', async () => {
    const carol = await t.createUser('carol');
    const moves = [
      { kind: 'subscription' as const, amount: '10.25', reason: 'monthly grant' },
      { kind: 'forever' as const, amount: '0.5', reason: 'purchase' },
      { kind: 'forever' as const, amount: '0.1', reason: 'purchase' },
      { kind: 'forever' as const, amount: '0.2', reason: 'purchase' },
    ];
    await t.db.$transaction(async (tx) => {
      for (const move of moves) await credit(tx, { userId: carol.id, ...move });
    });

    const body = await me(carol);
    expect(body.subscriptionBalance).toBe(10.25);
    expect(body.foreverBalance).toBe(0.8);
    expect(body.balance).toBe(11.05);
    expect(typeof body.balance).toBe('number');

    const ledger = await t.db.mannaLedger.findMany({ where: { userId: carol.id }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
    expect(ledger.map((row) => [row.kind, row.amount.toString(), row.balanceAfter.toString(), row.reason])).toEqual([
      ['subscription', '10.25', '10.25', 'monthly grant'],
      ['forever', '0.5', '0.5', 'purchase'],
      ['forever', '0.1', '0.6', 'purchase'],
      ['forever', '0.2', '0.8', 'purchase'],
    ]);
  });

  it('changes neither balance nor ledger when the transaction holding a credit fails', async () => {
    const dave = await t.createUser('dave');
    await t.db.$transaction((tx) => credit(tx, { userId: dave.id, kind: 'forever', amount: '3', reason: 'purchase' }));
    await expect(
      t.db.$transaction(async (tx) => {
        await credit(tx, { userId: dave.id, kind: 'subscription', amount: '5', reason: 'grant' });
        throw new Error('payment provider said no');
      }),
    ).rejects.toThrow('payment provider said no');
    await expect(
      t.db.$transaction((tx) => credit(tx, { userId: dave.id, kind: 'forever', amount: '-1', reason: 'bad' })),
    ).rejects.toThrow();

    const body = await me(dave);
    expect([body.balance, body.subscriptionBalance, body.foreverBalance]).toEqual([3, 0, 3]);
    expect(await t.db.mannaLedger.count({ where: { userId: dave.id } })).toBe(1);
  });
});
