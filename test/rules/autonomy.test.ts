import { describe, expect, it } from 'vitest';
import type { SessionEventPayload } from '../../src/domain/core/events.ts';
import { SHUT_DOWN } from '../../src/domain/replies/endings.ts';
import type { ReplyJob } from '../../src/domain/replies/engine.ts';
import type { AutonomyState } from '../../src/domain/autonomy/store.ts';
import { AUTO_REPLY_NEEDS_BUDGET, autonomyRules, chooseActor, nextStep, TURN_QUEUE } from '../../src/domain/autonomy/service.ts';
import { inMemoryJobQueue } from '../domain/in-memory-jobs.ts';
import { inMemoryAutonomyStore, World } from '../domain/in-memory-session-stores.ts';

// The autonomy rules over a session kept in memory, a job queue that runs only when told, and a
// reply engine that writes (or fails) each reply at once: who speaks next, when, and when and why
// the loop stops. No app, no database; test/rest/sessions.test.ts ("autonomous sessions") runs the same rules for real.

const T0 = new Date('2026-12-01T12:00:00Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

const state = (over: Partial<AutonomyState> = {}): AutonomyState => ({
  autoReply: true,
  replyInterval: 0,
  actorSelection: 'random',
  ownerId: 'olivia',
  agents: [
    { id: 'ada', name: 'Ada', key: 'ada', public: true, ownerId: 'olivia' },
    { id: 'bo', name: 'Bo', key: 'bo', public: false, ownerId: 'olivia' },
  ],
  lastSpeakerId: null,
  lastActivityAt: null,
  replying: false,
  budget: { turns: 10, tokens: null, manna: null },
  spent: { turns: 0, tokens: 0, manna: 0 },
  ...over,
});

describe('who speaks next', () => {
  const agents = [{ id: 'a' }, { id: 'b' }, { id: 'c' }];
  const draws = Array.from({ length: 100 }, (_, i) => i / 100);

  it('random: any of the agents, the last speaker included', () => {
    const chosen = new Set(draws.map((r) => chooseActor(agents, 'random', 'b', () => r)));
    expect([...chosen].sort()).toEqual(['a', 'b', 'c']);
  });

  it('random_exclude_last: any but the last speaker', () => {
    const chosen = new Set(draws.map((r) => chooseActor(agents, 'random_exclude_last', 'b', () => r)));
    expect([...chosen].sort()).toEqual(['a', 'c']);
  });

  it('random_exclude_last with one agent: that agent again (there is no one else)', () => {
    expect(chooseActor([{ id: 'a' }], 'random_exclude_last', 'a', () => 0.5)).toBe('a');
  });
});

describe('the next step, from the session as it is', () => {
  const random = () => 0;

  it('takes a turn when nothing is under way and the interval has passed', () => {
    expect(nextStep(state({ replyInterval: 5, lastActivityAt: at(0) }), at(5), random)).toEqual({ kind: 'turn', agentId: 'ada' });
  });

  it('waits out the interval after the last reply, and a reply under way (looking again a second later at least)', () => {
    expect(nextStep(state({ replyInterval: 5, lastActivityAt: at(0) }), at(2), random)).toEqual({ kind: 'wait', until: at(5) });
    expect(nextStep(state({ replyInterval: 0, replying: true }), at(2), random)).toEqual({ kind: 'wait', until: at(3) });
    expect(nextStep(state({ replyInterval: 30, replying: true }), at(2), random)).toEqual({ kind: 'wait', until: at(32) });
  });

  it('stops when a budget is spent, naming it', () => {
    const spent = (s: Partial<AutonomyState['spent']>, b: Partial<AutonomyState['budget']>) =>
      nextStep(
        state({ spent: { turns: 0, tokens: 0, manna: 0, ...s }, budget: { turns: null, tokens: null, manna: null, ...b } }),
        T0,
        random,
      );
    expect(spent({ turns: 3 }, { turns: 3 })).toEqual({ kind: 'stop', reason: 'turn_budget' });
    expect(spent({ tokens: 1200 }, { tokens: 1000 })).toEqual({ kind: 'stop', reason: 'token_budget' });
    expect(spent({ manna: 100 }, { manna: 100 })).toEqual({ kind: 'stop', reason: 'manna_budget' });
    expect(spent({ turns: 2 }, { turns: 3 }).kind).toBe('turn');
  });

  it('leaves out agents the owner may no longer use, and stops when none is left', () => {
    const strangers = state().agents.map((a) => ({ ...a, ownerId: 'someone-else' }));
    // Bo is private to someone else now: only Ada (public) may speak.
    expect(nextStep(state({ agents: strangers }), T0, () => 0.99)).toEqual({ kind: 'turn', agentId: 'ada' });
    expect(nextStep(state({ agents: strangers.map((a) => ({ ...a, public: false })) }), T0, random)).toEqual({
      kind: 'stop',
      reason: 'no_agent',
    });
  });

  it('does nothing once auto-reply is off', () => {
    expect(nextStep(state({ autoReply: false }), T0, random)).toEqual({ kind: 'off' });
  });
});

/** A session of Olivia's with Ada and Bo, the rules over it, and what its watchers were told. */
function arrange(settings: { turnBudget?: number; replyInterval?: number; fail?: 'provider' | 'shutdown' | 'manna' } = {}) {
  let clock = T0;
  const world = new World(() => clock);
  const olivia = world.user('olivia');
  const agents = [world.agent('Ada', olivia.id), world.agent('Bo', olivia.id)];
  const session = world.session(
    olivia.id,
    agents.map((a) => a.id),
    {
      turnBudget: settings.turnBudget ?? 3,
      autoReply: true,
      replyInterval: settings.replyInterval ?? 0,
      actorSelection: 'random_exclude_last',
    },
  );
  const jobs = inMemoryJobQueue();
  const told: SessionEventPayload[] = [];
  const replies: ReplyJob[] = [];
  const rules = autonomyRules({
    store: inMemoryAutonomyStore(world),
    bus: {
      publish: async (sessionId, event) => {
        told.push(event);
        return { ...event, seq: told.length, sessionId, at: clock.toISOString() };
      },
    },
    jobs: jobs.queue,
    // Each reply is written (or fails) at once, at the clock's time.
    replies: {
      instanceId: 'here',
      start: async (job) => {
        replies.push(job);
        const reply = world.messages.find((m) => m.id === job.replies[0]!.messageId)!;
        reply.updatedAt = clock;
        if (settings.fail === 'provider') Object.assign(reply, { status: 'failed', error: 'The model provider failed' });
        else if (settings.fail === 'shutdown') Object.assign(reply, { status: 'failed', error: SHUT_DOWN });
        else if (settings.fail === 'manna') Object.assign(reply, { status: 'failed', error: 'Session manna budget exceeded' });
        else Object.assign(reply, { status: 'complete', content: 'Indeed.' });
      },
    },
    log: { error: () => {} },
    now: () => clock,
    random: () => 0.5,
  });
  return {
    world,
    session,
    jobs,
    told,
    replies,
    rules,
    tick: (seconds: number) => {
      clock = at(seconds);
      return jobs.runDue(clock);
    },
  };
}

describe('an autonomous loop', () => {
  it('takes turns, the agents alternating, one job waiting at a time, until the turn budget stops it and says so', async () => {
    const { session, jobs, told, replies, rules, tick } = arrange({ turnBudget: 3 });
    await rules.startWork();
    await rules.changed(session.id, { autoReply: true, replyInterval: 0, actorSelectionMethod: 'random_exclude_last' }, false);
    for (let second = 0; second < 6 && jobs.waiting().length; second++) {
      expect(jobs.waiting()).toHaveLength(1);
      await tick(second);
    }
    const speakers = replies.map((r) => r.replies[0]!.agentId);
    expect(speakers).toHaveLength(3);
    expect(speakers[1]).not.toBe(speakers[0]);
    expect(speakers[2]).not.toBe(speakers[1]);
    // Each turn is a reply of the owner's session to no message of anyone's: its own prompt.
    expect(replies.every((r) => r.promptId === r.replies[0]!.messageId && r.userId === session.ownerId && r.excludeMemory)).toBe(true);
    expect(told.filter((e) => e.type === 'autonomous_turn')).toHaveLength(3);
    expect(told.at(-1)).toEqual({ type: 'autonomy_stopped', reason: 'turn_budget', detail: 'Session turn budget exceeded' });
    expect(session.autoReply).toBe(false);
    expect(session.turnsSpent).toBe(3);
    expect(jobs.waiting()).toEqual([]);
  });

  it('waits reply_interval after each reply, and goes on from a message a person wrote in between', async () => {
    const { world, session, jobs, replies, rules, tick } = arrange({ turnBudget: 10, replyInterval: 10 });
    await rules.startWork();
    await rules.changed(session.id, { autoReply: true, replyInterval: 10, actorSelectionMethod: 'random_exclude_last' }, false);
    await tick(0);
    expect(replies).toHaveLength(1);
    expect(jobs.waiting()).toMatchObject([{ key: session.id, at: at(10) }]);
    // At 5 s Olivia writes and Ada answers her at 6 s: the next turn is due 10 s after that answer.
    world.message(session.id, { role: 'user', senderId: session.ownerId, content: 'What about the tide?', updatedAt: at(5) });
    world.message(session.id, { role: 'assistant', senderId: session.agentIds[0], content: 'It turns at six.', updatedAt: at(6) });
    await tick(10);
    expect(replies).toHaveLength(1);
    expect(jobs.waiting()).toMatchObject([{ at: at(16) }]);
    await tick(16);
    expect(replies).toHaveLength(2);
    // Ada spoke last (to Olivia): Bo takes the turn.
    expect(replies[1]!.replies[0]!.agentId).toBe(session.agentIds[1]);
    expect(jobs.waiting()).toHaveLength(1);
  });

  it('a shorter reply_interval set while a turn waits brings that turn forward', async () => {
    const { session, jobs, replies, rules, tick } = arrange({ turnBudget: 10, replyInterval: 3600 });
    await rules.startWork();
    await rules.changed(session.id, { autoReply: true, replyInterval: 3600, actorSelectionMethod: 'random' }, false);
    await tick(0);
    expect(jobs.waiting()).toMatchObject([{ at: at(3600) }]);
    // The owner shortens the interval to 10 s (the session is saved first, as the service does).
    session.replyInterval = 10;
    await rules.changed(session.id, { autoReply: true, replyInterval: 10, actorSelectionMethod: 'random' }, true);
    await tick(1);
    expect(jobs.waiting()).toMatchObject([{ key: session.id, at: at(10) }]);
    await tick(10);
    expect(replies).toHaveLength(2);
  });

  it('a turn due while a person is being answered waits for the answer (no second reply at once)', async () => {
    const { world, session, jobs, replies, rules, tick } = arrange({ turnBudget: 10 });
    await rules.startWork();
    world.message(session.id, { role: 'user', senderId: session.ownerId, content: 'Hello' });
    const answer = world.message(session.id, { role: 'assistant', senderId: session.agentIds[0], status: 'streaming' });
    await rules.changed(session.id, { autoReply: true, replyInterval: 0, actorSelectionMethod: 'random_exclude_last' }, false);
    await tick(0);
    expect(replies).toEqual([]);
    expect(jobs.waiting()).toMatchObject([{ at: at(1) }]);
    Object.assign(answer, { status: 'complete', updatedAt: at(0.5) });
    await tick(1);
    expect(replies).toHaveLength(1);
  });

  it('stops when its owner turns it off: the waiting turn is dropped, and the watchers told', async () => {
    const { session, jobs, told, rules, tick } = arrange({ replyInterval: 60 });
    await rules.startWork();
    await rules.changed(session.id, { autoReply: true, replyInterval: 60, actorSelectionMethod: 'random' }, false);
    await tick(0);
    expect(jobs.waiting()).toHaveLength(1);
    // A cancel of everything in the session.
    expect(await rules.turnOff(session.id)).toBe(true);
    expect(jobs.waiting()).toEqual([]);
    expect(told.at(-1)).toEqual({ type: 'autonomy_stopped', reason: 'turned_off', detail: 'Auto-reply was turned off' });
    // Told once: a second cancel finds it off.
    expect(await rules.turnOff(session.id)).toBe(false);
    expect(told.filter((e) => e.type === 'autonomy_stopped')).toHaveLength(1);
  });

  it('turned off just as a turn job sends the next turn: the turn it sent is taken back', async () => {
    const { session, jobs, told, rules, tick } = arrange({ replyInterval: 60 });
    await rules.startWork();
    const on = { autoReply: true, replyInterval: 60, actorSelectionMethod: 'random' as const };
    await rules.changed(session.id, on, false);
    // The owner's change lands after the turn job read the session, and before its send of the next turn.
    const send = jobs.queue.send;
    jobs.queue.send = async (...args: Parameters<typeof send>) => {
      jobs.queue.send = send;
      session.autoReply = false;
      await rules.changed(session.id, { ...on, autoReply: false }, true);
      return send(...args);
    };
    await tick(0);
    expect(jobs.waiting()).toEqual([]);
    expect(told.filter((e) => e.type === 'autonomy_stopped')).toHaveLength(1);
  });

  it('stops after a turn whose reply failed, rather than spend the budget on failures', async () => {
    const { session, jobs, told, rules, tick } = arrange({ fail: 'provider' });
    await rules.startWork();
    await rules.changed(session.id, { autoReply: true, replyInterval: 0, actorSelectionMethod: 'random' }, false);
    await tick(0);
    expect(told.at(-1)).toMatchObject({ type: 'autonomy_stopped', reason: 'reply_failed' });
    expect(jobs.waiting()).toEqual([]);
    expect(session.turnsSpent).toBe(1);
  });

  it('stops for the budget a failed turn ran out of, naming it', async () => {
    const { jobs, session, told, rules, tick } = arrange({ fail: 'manna' });
    await rules.startWork();
    await rules.changed(session.id, { autoReply: true, replyInterval: 0, actorSelectionMethod: 'random' }, false);
    await tick(0);
    expect(told.at(-1)).toMatchObject({ type: 'autonomy_stopped', reason: 'manna_budget', detail: 'Session manna budget exceeded' });
    expect(jobs.waiting()).toEqual([]);
  });

  it('a turn cut off by a shutdown fails its job (to be tried again) and leaves the loop on', async () => {
    const { session, told, rules, tick } = arrange({ fail: 'shutdown' });
    await rules.startWork();
    await rules.changed(session.id, { autoReply: true, replyInterval: 0, actorSelectionMethod: 'random' }, false);
    await expect(tick(0)).rejects.toThrow(/cut off/);
    expect(session.autoReply).toBe(true);
    expect(told.some((e) => e.type === 'autonomy_stopped')).toBe(false);
  });

  it('a turn cut off on every try stops the loop once the queue gives up on it, and says so', async () => {
    const { session, jobs, told, replies, rules, tick } = arrange({ fail: 'shutdown', turnBudget: 20 });
    await rules.startWork();
    await rules.changed(session.id, { autoReply: true, replyInterval: 0, actorSelectionMethod: 'random' }, false);
    // A try that throws fails its job; the queue sends it again two seconds later.
    for (let second = 0; second < 60 && session.autoReply; second++) await tick(second).catch(() => {});
    // The first try and five more (the turn queue's retries), each a reply cut off, then no more.
    expect(replies).toHaveLength(6);
    expect(session.autoReply).toBe(false);
    expect(told.at(-1)).toMatchObject({ type: 'autonomy_stopped', reason: 'reply_failed' });
    expect(jobs.waiting()).toEqual([]);
  });

  it('a turn whose instance died on its last try stops the loop too, though no turn handler saw it end', async () => {
    const { session, jobs, told, replies, rules, tick } = arrange({ turnBudget: 20 });
    await rules.startWork();
    await rules.changed(session.id, { autoReply: true, replyInterval: 0, actorSelectionMethod: 'random' }, false);
    // Each try's instance dies: the queue's supervision fails it, two seconds apart, six times.
    let abandoned = 0;
    for (let second = 0; second < 60 && abandoned < 6; second++) abandoned += jobs.abandonDue(TURN_QUEUE, at(second));
    expect(abandoned).toBe(6);
    expect(session.autoReply).toBe(true);
    await tick(60);
    expect(replies).toEqual([]);
    expect(session.autoReply).toBe(false);
    expect(told.at(-1)).toMatchObject({ type: 'autonomy_stopped', reason: 'reply_failed' });
    expect(jobs.waiting()).toEqual([]);
  });
});

describe('turning it on', () => {
  it('is refused without a budget, in the original words, and allowed with one', async () => {
    const { world, session, rules } = arrange();
    const unbudgeted = world.session(session.ownerId, session.agentIds);
    const on = { autoReply: true, replyInterval: 0, actorSelectionMethod: 'random' as const };
    await expect(rules.check(unbudgeted.id, on, false)).rejects.toMatchObject({ code: 'BAD_USER_INPUT', message: AUTO_REPLY_NEEDS_BUDGET });
    // A new session without a budget in the same request, likewise.
    await expect(rules.check(undefined, on, false)).rejects.toMatchObject({ message: AUTO_REPLY_NEEDS_BUDGET });
    await expect(rules.check(unbudgeted.id, on, true)).resolves.toBe(false);
    await expect(rules.check(session.id, on, false)).resolves.toBe(true);
    // Turning it off needs no budget.
    await expect(rules.check(unbudgeted.id, { ...on, autoReply: false }, false)).resolves.toBe(false);
  });

  it('sends one turn job per session, however often it is turned on', async () => {
    const { session, jobs, rules } = arrange();
    await rules.startWork();
    const on = { autoReply: true, replyInterval: 0, actorSelectionMethod: 'random' as const };
    await rules.changed(session.id, on, false);
    await rules.changed(session.id, on, true);
    expect(jobs.waiting()).toMatchObject([{ queue: TURN_QUEUE, key: session.id }]);
  });
});
