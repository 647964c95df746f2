import { coalesced, coalescedWrites } from '../core/coalesce.ts';
import type { Claim, RunLink, Trigger, TriggerClaim, TriggerStore } from './store.ts';

/**
 * The store's statements as the runner makes them, one trigger at a time, grouped with those of
 * the runs going on at the same moment: a hundred triggers due in one second read, claim and link
 * in a few statements, not a hundred each (on the embedded database every statement waits for the
 * one thread, and the runs due last waited for all the others').
 */
export function runnerStatements(store: TriggerStore) {
  const finds = coalesced(async (ids: readonly string[]) => new Map((await store.findMany(ids)).map((t) => [t.id, t])));
  // As writes: a claim that fails the group's statement (a second run for an occurrence) is
  // tried again alone, and only it comes back unclaimed.
  const claims = coalescedWrites(async (asked: readonly TriggerClaim[]) => {
    const byRun = new Map((await store.claim(asked)).map((t) => [t.runningRunId, t]));
    const claimed = new Map<TriggerClaim, Trigger>();
    for (const c of asked) {
      const trigger = byRun.get(c.claim.runId);
      if (trigger) claimed.set(c, trigger);
    }
    return claimed;
  });
  const links = coalesced(async (asked: readonly RunLink[]) => {
    await store.linkRuns(asked);
    return new Map(asked.map((l) => [l, true]));
  });

  return {
    /** A trigger by id, whoever owns it. */
    find: (id: string): Promise<Trigger | null> => finds.load(id),
    /** Starts a run (`TriggerStore.claim`): the trigger after, or null when it could not be claimed. */
    claimRun: (triggerId: string, claim: Claim): Promise<Trigger | null> => claims.load({ triggerId, claim }),
    /** Links the session and reply a run's prompt went into. */
    linkRun: async (runId: string, sessionId: string, messageId: string | null) => {
      await links.load({ runId, sessionId, messageId });
    },
  };
}

export type RunnerStatements = ReturnType<typeof runnerStatements>;
