import { beforeAll, describe, expect, it } from 'vitest';
import { type MemoryService, memoryService, memoryStore } from '../../src/domain/memories/index.ts';
import { MEMORY_CAP } from '../../src/domain/memories/service.ts';
import { chatProviderFor } from '../../src/providers/index.ts';
import { domainConfig, domainDatabase, people, quietLog } from '../helpers/domain-database.ts';

// Replies that end together each remember what they learnt; their facts are written by one
// statement. The memory service over its store on the real database (no app), with the offline
// extractor (facts by rule from what the user said), so that every exchange is ready in the same moment.

type User = { id: string };
const t = domainDatabase();
let memories: MemoryService;
let dana: User;
let fin: User;
let ada: { id: string };
let bo: { id: string };
let make: Awaited<ReturnType<typeof people>>;

beforeAll(async () => {
  const { provider, offline } = chatProviderFor(domainConfig.llm);
  memories = memoryService(memoryStore(t.db), provider, { offline, model: domainConfig.llm.models.default }, quietLog);
  make = await people(t.db);
  [dana, fin] = [await make.user('dana'), await make.user('fin')];
  ada = await make.agent(dana, { name: 'Ada', key: 'ada' });
  bo = await make.agent(dana, { name: 'Bo', key: 'bo' });
});

const remember = (agent: { id: string }, user: User, prompt: string) =>
  memories.host.remember({ agentId: agent.id, userId: user.id, sessionId: 'a-session', prompt, reply: 'Noted.' });
const facts = async (agent: { id: string }, user: User) => (await memories.list({ id: user.id }, agent.id)).map((m) => m.fact);
const memoryWrites = (from: number) => t.queries.slice(from).filter((q) => q.includes('INSERT INTO "Memory"'));

describe('memories learnt together', () => {
  it('are written by one statement, each fact once per agent and user, keeping the newest up to the cap', async () => {
    await t.db.memory.createMany({
      data: Array.from({ length: MEMORY_CAP - 1 }, (_, i) => ({
        agentId: ada.id,
        userId: dana.id,
        fact: `Old ${i}`,
        key: `old ${i}`,
        // Learnt in the last hour, a second apart, on the clock the new ones are stamped with.
        createdAt: new Date(Date.now() - 3_600_000 + i * 1000),
      })),
    });
    const before = t.queries.length;
    await Promise.all([
      remember(ada, dana, 'My name is Dana. I live in Lisbon.'),
      remember(ada, dana, 'I live in Lisbon. I prefer tea.'),
      remember(ada, fin, 'My name is Fin.'),
      remember(bo, dana, 'I prefer tea.'),
    ]);
    expect(memoryWrites(before)).toHaveLength(1);

    // Three new facts on top of MEMORY_CAP - 1: the two oldest go, "Lives in Lisbon" is kept once.
    const adaOfDana = await facts(ada, dana);
    expect(adaOfDana).toHaveLength(MEMORY_CAP);
    expect(adaOfDana.slice(0, 3).sort()).toEqual(['Lives in Lisbon', 'Prefers tea', 'Their name is Dana']);
    expect(adaOfDana).not.toContain('Old 0');
    expect(adaOfDana).not.toContain('Old 1');
    expect(adaOfDana).toContain('Old 2');
    expect(await facts(ada, fin)).toEqual(['Their name is Fin']);
    expect(await facts(bo, dana)).toEqual(['Prefers tea']);
  });

  it('that the database refuses as a group are written again one exchange at a time: only the one for a deleted agent is lost', async () => {
    const gone = await make.agent(dana, { name: 'Gone', key: 'gone' });
    await t.db.agent.delete({ where: { id: gone.id } });
    const results = await Promise.allSettled([
      remember(ada, fin, 'I prefer jazz.'),
      remember(gone, fin, 'I prefer rock.'),
      remember(bo, fin, 'I live in Oslo.'),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(await facts(ada, fin)).toEqual(['Prefers jazz', 'Their name is Fin']);
    expect(await facts(bo, fin)).toEqual(['Lives in Oslo']);
    expect(await t.db.memory.count({ where: { agentId: gone.id } })).toBe(0);
  });
});
