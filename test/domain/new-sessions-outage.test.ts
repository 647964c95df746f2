import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/database.ts';
import { isDatabaseUnavailable } from '../../src/domain/core/stores/prisma-errors.ts';
import { newSessionWriter } from '../../src/domain/sessions/prompt-store.ts';
import { databaseBehindProxy } from '../helpers/postgres-server.ts';
import type { TcpProxy } from '../helpers/tcp-proxy.ts';

/**
 * New sessions that arrive together while PostgreSQL is out of reach (a proxy the test cuts): one
 * statement fails, every caller is told the database is unavailable, and the writer does not try
 * each session again on its own against a database that is not there.
 */
describe('new sessions written together while the database is away', () => {
  let behind: Awaited<ReturnType<typeof databaseBehindProxy>>;
  let proxy: TcpProxy;
  let db: Database;
  let ownerId: string;
  let agent: { id: string; name: string };
  /** Statements the writer sent, through the real client. */
  let statements = 0;
  const counted = {
    $queryRaw: ((...args: Parameters<Database['prisma']['$queryRaw']>) => {
      statements++;
      return db.prisma.$queryRaw(...args);
    }) as Database['prisma']['$queryRaw'],
  };

  beforeAll(async () => {
    behind = await databaseBehindProxy();
    ({ proxy, db } = behind);
    ownerId = (await db.prisma.user.create({ data: { username: 'alice' } })).id;
    const profile = await db.prisma.user.create({ data: { username: 'ada' } });
    agent = await db.prisma.agent.create({
      data: { id: profile.id, ownerId, name: 'Ada', public: true },
      select: { id: true, name: true },
    });
  });
  afterAll(() => behind?.close());

  const prompt = (content: string) => ({
    userId: ownerId,
    instance: 'test-instance',
    prompt: { content, attachments: [], responders: [agent.id] },
    session: { create: { agents: [agent] } },
  });
  const contents = ['one', 'two', 'three', 'four'];

  it('fails every caller with "unavailable" after one statement, and writes them all once it is back', async () => {
    const save = newSessionWriter(counted);
    await proxy.cut();
    let outcomes: PromiseSettledResult<unknown>[];
    try {
      statements = 0;
      outcomes = await Promise.allSettled(contents.map((c) => save(prompt(c))));
    } finally {
      await proxy.restore();
    }
    expect(outcomes.map((o) => o.status)).toEqual(contents.map(() => 'rejected'));
    for (const o of outcomes) expect(isDatabaseUnavailable((o as PromiseRejectedResult).reason), String(o)).toBe(true);
    expect(statements).toBe(1);

    // The same sessions, asked again with the database back, are written in one statement.
    statements = 0;
    const saved = await Promise.all(contents.map((c) => save(prompt(c))));
    expect(statements).toBe(1);
    const prompts = await db.prisma.message.findMany({
      where: { sessionId: { in: saved.map((s) => s.sessionId) }, role: 'user' },
      select: { content: true },
    });
    expect(prompts.map((m) => m.content).sort()).toEqual([...contents].sort());
  });
});
