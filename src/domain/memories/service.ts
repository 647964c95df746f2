import type { ChatProvider } from '../core/chat.ts';
import type { MemoryHost } from '../core/tool-host.ts';
import type { Viewer } from '../core/viewer.ts';
import { coalescedWrites } from '../core/coalesce.ts';
import { notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import { EXTRACTION_INSTRUCTION, factKey, factsByRule, factsFromAnswer } from './extract.ts';
import type { MemoryStore } from './store.ts';

/** Facts kept per agent and user; past it the oldest go. */
export const MEMORY_CAP = 50;
/** Exchanges whose facts one statement writes at most. */
const LEARNT_PER_STATEMENT = 100;
/** Facts put into a prompt: the most recent. */
const RECALLED = 20;

/** What one exchange taught an agent about a user. */
interface Learnt {
  agentId: string;
  userId: string;
  sessionId: string;
  facts: string[];
}

/** The facts a prompt takes of one user's, from rows newest first: the latest, oldest first. */
export const recalledFacts = (rows: { fact: string; userId: string }[], userId: string) =>
  rows
    .filter((r) => r.userId === userId)
    .slice(0, RECALLED)
    .toReversed()
    .map((r) => r.fact);

/**
 * What agents remember about the people they talk to. After an exchange (unless the user kept
 * it out of memory) the facts about the user are extracted, by a small separate model call or,
 * offline, by rule; kept per agent and user, without duplicates, at most MEMORY_CAP; and the
 * latest go into that agent's later prompts with that user, in any session. The extraction call
 * is housekeeping: it spends nothing of the session's budgets.
 */
export function memoryService(
  store: MemoryStore,
  provider: ChatProvider,
  options: { offline: boolean; model: string },
  log: { error(obj: unknown, msg?: string): void },
) {
  async function extract(prompt: string, reply: string, signal: AbortSignal | undefined): Promise<string[]> {
    if (options.offline) return factsByRule(prompt);
    const request = {
      model: options.model,
      messages: [
        { role: 'system' as const, content: EXTRACTION_INSTRUCTION },
        { role: 'user' as const, content: `User: ${prompt.slice(0, 4000)}\n\nAgent: ${reply.slice(0, 4000)}` },
      ],
      tools: [],
      maxTokens: 120,
      reasoningEffort: null,
      agent: { name: '', key: '', description: '', greeting: '', knowledge: '', suggestions: [] },
    };
    const timeout = AbortSignal.timeout(30_000);
    return factsFromAnswer(await provider.complete(request, signal ? AbortSignal.any([signal, timeout]) : timeout));
  }

  /** Facts learnt in exchanges that end together are kept by one statement: replies finishing by the thousand each remember. */
  const keep = coalescedWrites<Learnt, true>(async (group) => {
    await store.keep(
      group.flatMap((l) =>
        l.facts.map((fact) => ({ agentId: l.agentId, userId: l.userId, sessionId: l.sessionId, fact, key: factKey(fact) })),
      ),
      MEMORY_CAP,
    );
    return new Map(group.map((l) => [l, true as const]));
  }, LEARNT_PER_STATEMENT);

  const host: MemoryHost = {
    async recall(agentId, userId) {
      return recalledFacts(await store.recent(agentId, userId, RECALLED), userId);
    },

    async remember({ agentId, userId, sessionId, prompt, reply }, signal) {
      let facts: string[];
      try {
        facts = await extract(prompt, reply, signal);
      } catch (err) {
        // Given up on shutdown: nothing went wrong.
        if (!signal?.aborted) log.error({ err }, 'could not extract memories');
        return;
      }
      if (facts.length === 0) return;
      await keep.load({ agentId, userId, sessionId, facts: facts.slice(0, MEMORY_CAP) });
    },
  };

  return {
    host,

    /** What an agent remembers about the caller, newest first. */
    list(viewer: Viewer, agentId: string) {
      return store.list(agentId, viewer.id);
    },

    /** Forgets one fact (by id) or everything the agent remembers about the caller; returns how many. */
    async forget(viewer: Viewer, agentId: string, memoryId?: string) {
      if (memoryId !== undefined && !canNameARow(memoryId)) throw notFound('Memory not found');
      const count = await store.forget(agentId, viewer.id, memoryId);
      if (memoryId !== undefined && count === 0) throw notFound('Memory not found');
      return count;
    },
  };
}

export type MemoryService = ReturnType<typeof memoryService>;
