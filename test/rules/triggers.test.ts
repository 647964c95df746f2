import { describe, expect, it } from 'vitest';
import type { BusItem, BusSubscription } from '../../src/domain/core/bus.ts';
import { badInput, DomainError } from '../../src/domain/core/errors.ts';
import type { SessionEvent } from '../../src/domain/core/events.ts';
import type { Viewer } from '../../src/domain/core/viewer.ts';
import { promptOutcomes } from '../../src/domain/replies/outcome.ts';
import type { SavedReply } from '../../src/domain/replies/ports.ts';
import type { PromptStarted } from '../../src/domain/sessions/index.ts';
import type { TriggerEvent, TriggerJob } from '../../src/domain/triggers/ports.ts';
import { triggerRunner } from '../../src/domain/triggers/runner.ts';
import { triggerService } from '../../src/domain/triggers/service.ts';
import { memoryTriggerDatabase, memoryTriggerStore } from '../domain/in-memory-trigger-store.ts';

// The trigger rules over the in-memory store, a queue the test drives and a clock it sets: the
// real schedule computation, and no waiting. What the database adds (the same claim in SQL
// across processes) is tested on PGlite and PostgreSQL in test/triggers/.

const owner: Viewer = { id: 'owner' };
const stranger: Viewer = { id: 'stranger' };
const RUN_TIMEOUT_MS = 60_000;

function harness(limits = { minIntervalS: 1, perUser: 5 }) {
  let clock = new Date('2027-03-01T12:00:00.000Z');
  const now = () => new Date(clock);
  const db = memoryTriggerDatabase();
  db.agents.set('agent', { id: 'agent', ownerId: owner.id, public: true });
  db.agents.set('private-agent', { id: 'private-agent', ownerId: stranger.id, public: false });
  db.agents.set('public-agent', { id: 'public-agent', ownerId: stranger.id, public: true });
  const store = memoryTriggerStore(db, now);
  const queue: { at: Date; job: TriggerJob }[] = [];
  const told: TriggerEvent[] = [];
  const prompts: { viewer: Viewer; input: Record<string, unknown>; sessionId: string; promptId: string; messageId: string }[] = [];
  const cancelled: string[] = [];
  /** What the next prompts are answered with: an error thrown by operation 4. */
  const refusals: DomainError[] = [];
  const sessions = sessionChannels();
  let seq = 0;

  async function send(viewer: Viewer, raw: unknown): Promise<PromptStarted> {
    const refusal = refusals.shift();
    if (refusal) throw refusal;
    const input = raw as Record<string, unknown>;
    const n = ++seq;
    const sessionId = (input.sessionId as string) ?? `session-${n}`;
    const prompt = { viewer, input, sessionId, promptId: `prompt-${n}`, messageId: `reply-${n}` };
    prompts.push(prompt);
    db.replies.set(prompt.messageId, { status: 'streaming', error: null, toolErrors: [], promptId: prompt.promptId });
    return {
      sessionId,
      created: !input.sessionId,
      promptId: prompt.promptId,
      message: null,
      replies: [{ messageId: prompt.messageId, agentId: 'agent', ordinal: 2, createdAt: now() }],
      startSeq: sessions.position(sessionId),
    };
  }

  /** The replies' own wait, over the channels above and the replies as saved here. */
  const outcomes = promptOutcomes({
    bus: { subscribe: (id, options) => sessions.subscribe(id, options?.after ?? 0), position: async (id) => sessions.position(id) },
    store: {
      async promptOutcome(promptId) {
        const prompt = prompts.find((p) => p.promptId === promptId);
        if (!prompt) return null;
        const replies = [...db.replies].filter(([, r]) => r.promptId === promptId);
        return {
          sessionId: prompt.sessionId,
          replies: replies.map(([messageId, r]) => ({
            messageId,
            status: r.status as SavedReply['status'],
            content: '',
            error: r.error,
            toolCalls: r.toolErrors.map((error) => ({ status: 'failed', result: null, error })),
          })),
        };
      },
    },
  });
  const events = { publish: async (_userId: string, event: TriggerEvent) => void told.push(event) };
  const runner = triggerRunner({
    store,
    jobs: { at: async (at, job) => void queue.push({ at, job }) },
    events,
    send,
    awaitOutcome: outcomes.awaitOutcome,
    outcome: outcomes.outcome,
    cancel: async (_sessionId, promptId) => void cancelled.push(promptId),
    runTimeoutMs: RUN_TIMEOUT_MS,
    lateGraceMs: 10_000,
    promptLeaseMs: 10_000,
    log: { error: () => {} },
    now,
  });
  const service = triggerService(store, runner, events, limits);

  /** Lets what runs in the background (a reply followed to its end) go on. */
  const settle = async () => {
    for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
  };

  /**
   * Sets the clock, queues what comes near as every instance's sweep does each minute (a job is
   * sent only for an occurrence due soon), and hands every job due by then to the runner, as the
   * queue would.
   */
  async function at(iso: string) {
    clock = new Date(iso);
    await runner.sweep();
    for (;;) {
      await settle();
      const due = queue.filter((q) => q.at <= clock).sort((a, b) => a.at.getTime() - b.at.getTime());
      if (!due.length) return;
      for (const q of due) queue.splice(queue.indexOf(q), 1);
      for (const q of due) await runner.handle(q.job);
    }
  }

  /** The reply to a prompt ends, as the reply engine would save and tell it. */
  async function reply(
    promptId: string,
    outcome: { status: 'complete' | 'failed'; error?: string; toolErrors?: string[] } = { status: 'complete' },
  ) {
    const prompt = prompts.find((p) => p.promptId === promptId)!;
    db.replies.set(prompt.messageId, {
      status: outcome.status,
      error: outcome.error ?? null,
      toolErrors: outcome.toolErrors ?? [],
      promptId,
    });
    sessions.publish(prompt.sessionId, { type: 'end_prompt', promptId } as SessionEvent);
    await settle();
  }

  const trigger = (id: string) => db.triggers.get(id)!;
  const runsOf = (id: string) =>
    [...db.runs.values()].filter((r) => r.triggerId === id).sort((a, b) => a.startedAt.getTime() - b.startedAt.getTime());

  return { db, service, runner, queue, told, prompts, cancelled, refusals, at, reply, trigger, runsOf, now };
}

/** Each session's events as a bus would keep them, with `after` replay. */
function sessionChannels() {
  const logs = new Map<string, SessionEvent[]>();
  const wakers = new Map<string, Set<() => void>>();
  const log = (id: string) => logs.get(id) ?? (logs.set(id, []), logs.get(id)!);
  return {
    position: (id: string) => log(id).length,
    publish(id: string, event: SessionEvent) {
      log(id).push({ ...event, seq: log(id).length + 1 });
      for (const wake of wakers.get(id) ?? []) wake();
    },
    subscribe(id: string, after: number): BusSubscription {
      let next = after;
      let closed = false;
      let wake = () => {};
      const set = wakers.get(id) ?? (wakers.set(id, new Set()), wakers.get(id)!);
      const subscription: BusSubscription = {
        async next(): Promise<IteratorResult<BusItem>> {
          for (;;) {
            if (closed) return { done: true, value: undefined };
            const event = log(id)[next];
            if (event) {
              next++;
              return { done: false, value: event };
            }
            await new Promise<void>((resolve) => {
              wake = resolve;
              set.add(resolve);
            });
            set.delete(wake);
          }
        },
        async return() {
          subscription.close();
          return { done: true, value: undefined };
        },
        close() {
          closed = true;
          wake();
        },
        [Symbol.asyncIterator]() {
          return subscription;
        },
      };
      return subscription;
    },
  };
}

const everyTenSeconds = { second: '*/10', timezone: 'UTC' };
const refusalOf = async (promise: Promise<unknown>) => {
  try {
    await promise;
  } catch (e) {
    if (e instanceof DomainError) return { code: e.code, field: e.fieldPath?.join('.'), message: e.message };
    throw e;
  }
  throw new Error('accepted');
};

describe('who may schedule an agent', () => {
  it('only its owner: a stranger is told what a private agent tells them, for a public agent too, and nothing is made', async () => {
    const h = harness();
    const privateOne = await refusalOf(h.service.create(owner, 'private-agent', { prompt: 'Hi', schedule: null }));
    const publicOne = await refusalOf(h.service.create(owner, 'public-agent', { prompt: 'Hi', schedule: null }));
    expect(publicOne).toEqual(privateOne);
    expect(publicOne).toMatchObject({ code: 'FORBIDDEN', message: 'You do not have access to this agent' });
    expect(await refusalOf(h.service.create(owner, 'no-such-agent', { prompt: 'Hi', schedule: null }))).toMatchObject({
      code: 'NOT_FOUND',
    });
    expect(h.db.triggers.size).toBe(0);
    expect(h.queue).toEqual([]);

    const mine = await h.service.create(owner, 'agent', { prompt: 'Hi', schedule: null });
    for (const attempt of [
      h.service.get(stranger, mine.id),
      h.service.update(stranger, mine.id, { name: 'Taken' }),
      h.service.remove(stranger, mine.id),
      h.service.runNow(stranger, mine.id),
      h.service.listForAgent(stranger, 'agent'),
    ])
      expect((await refusalOf(attempt)).code).toMatch(/NOT_FOUND|FORBIDDEN/);
    expect(h.trigger(mine.id).name).toBe('Untitled Task');
    expect(h.db.runs.size).toBe(0);
    expect(await h.service.listMine(stranger)).toEqual([]);
  });

  it('at most TRIGGERS_PER_USER triggers each, over all their agents', async () => {
    const h = harness({ minIntervalS: 1, perUser: 2 });
    await h.service.create(owner, 'agent', { prompt: 'One', schedule: null });
    await h.service.create(owner, 'agent', { prompt: 'Two', schedule: null });
    expect(await refusalOf(h.service.create(owner, 'agent', { prompt: 'Three', schedule: null }))).toMatchObject({
      code: 'UNPROCESSABLE',
      message: 'Trigger limit reached: a user may have at most 2 triggers',
    });
    expect(h.db.triggers.size).toBe(2);
  });

  it('into an existing session only when it is the owner’s and the agent is in it', async () => {
    const h = harness();
    h.db.sessions.set('mine', { ownerId: owner.id, agentIds: ['agent'] });
    h.db.sessions.set('mine-without-agent', { ownerId: owner.id, agentIds: [] });
    h.db.sessions.set('theirs', { ownerId: stranger.id, agentIds: ['agent'] });
    const bad = (sessionId: string) =>
      refusalOf(h.service.create(owner, 'agent', { prompt: 'Hi', schedule: null, sessionTarget: 'existing', sessionId }));
    expect(await bad('theirs')).toMatchObject({ code: 'BAD_USER_INPUT', field: 'sessionId' });
    expect(await bad('mine-without-agent')).toMatchObject({ code: 'BAD_USER_INPUT', field: 'sessionId' });
    expect(await bad('nowhere')).toMatchObject({ code: 'BAD_USER_INPUT', field: 'sessionId' });
    expect(await refusalOf(h.service.create(owner, 'agent', { prompt: 'Hi', schedule: null, sessionTarget: 'existing' }))).toMatchObject({
      field: 'sessionId',
    });
    const made = await h.service.create(owner, 'agent', { prompt: 'Hi', schedule: null, sessionId: 'mine' });
    expect(made).toMatchObject({ sessionTarget: 'existing', sessionId: 'mine' });
    expect(h.db.triggers.size).toBe(1);
  });
});

describe('bad schedules', () => {
  it.each([
    [{ second: '0', minute: '99' }, 'schedule.minute'],
    [{ second: '0', timezone: 'Not/AZone' }, 'schedule.timezone'],
    [{ second: '0', startDate: '2027-04-01T00:00:00Z', endDate: '2027-03-15T00:00:00Z' }, 'schedule.endDate'],
    [{ second: '0', minute: '0', hour: '0', dayOfMonth: '31', month: '4' }, 'schedule.dayOfMonth'],
    [{ second: '0', endDate: '2027-02-01T00:00:00Z' }, 'schedule.endDate'],
    [{ second: '*' }, 'schedule.second'],
  ])('%j is a 400 naming %s, and makes nothing', async (schedule, field) => {
    const h = harness({ minIntervalS: 5, perUser: 5 });
    expect(await refusalOf(h.service.create(owner, 'agent', { prompt: 'Hi', schedule }))).toMatchObject({ code: 'BAD_USER_INPUT', field });
    expect(h.db.triggers.size).toBe(0);
    expect(h.queue).toEqual([]);
  });

  it('a missing schedule is refused (null is a trigger run by hand)', async () => {
    const h = harness();
    expect(await refusalOf(h.service.create(owner, 'agent', { prompt: 'Hi' }))).toMatchObject({ field: 'schedule', message: /required/ });
    expect(await refusalOf(h.service.create(owner, 'agent', { prompt: '  ', schedule: null }))).toMatchObject({ field: 'prompt' });
  });
});

describe('what a schedule may say', () => {
  it.each([
    [{ second: '0', minute: '0', hour: '25' }, 'schedule.hour', /./],
    [{ second: '0', minute: '0', hour: '0', dayOfMonth: '30', month: '2' }, 'schedule.dayOfMonth', /^never fires/],
    [{ second: '0', timezone: 'Europe/Atlantis' }, 'schedule.timezone', /^must be an IANA time zone/],
    [{ second: '0', startDate: '2030-01-02T00:00:00Z', endDate: '2030-01-01T00:00:00Z' }, 'schedule.endDate', /./],
    [{ cron: '0 9 * * *', hour: '10' }, 'schedule.hour', /^disagrees with cron, whose hour is "9"/],
    [{ cron: '0 9 * * 1-5', dayOfWeek: 'sat' }, 'schedule.dayOfWeek', /^disagrees with cron, whose day of week is "1-5"/],
    [{ cron: '0 9 * *' }, 'schedule.cron', /^must have 5 fields .* or 6/],
    [{ cron: '0 0 9 * * * *' }, 'schedule.cron', /^must have 5 fields/],
    [{ cron: '0 25 * * *' }, 'schedule.cron', /^its hour "25" .*\(0-23\)/],
    [{ cron: '*/2 * * * * *' }, 'schedule.cron', /^runs every 2 s at the closest; the shortest interval allowed is 5 s/],
    [{ second: '*/2' }, 'schedule.second', /^runs every 2 s at the closest; the shortest interval allowed is 5 s/],
    [{ cron: '0 0 31 2 *' }, 'schedule.cron', /^never fires/],
    [{ cron: '' }, 'schedule.cron', /^must not be empty/],
    [{ cron: 9 }, 'schedule.cron', /^must be text/],
    [{ second: '0', startDate: '+275760-09-13T00:00:00Z' }, 'schedule.startDate', /^must be a date from 1970-01-01 to 9999-12-31/],
    [{ second: '0', endDate: '+010000-01-01T00:00:00Z' }, 'schedule.endDate', /^must be a date from 1970-01-01 to 9999-12-31/],
    [{ second: '0', startDate: '1969-12-31T23:59:59Z' }, 'schedule.startDate', /^must be a date from 1970-01-01 to 9999-12-31/],
    // Yearly, from a start date whose first run would fall in the year 10000.
    [
      { second: '0', minute: '0', hour: '0', dayOfMonth: '1', month: '1', startDate: '9999-06-01T00:00:00Z' },
      'schedule.startDate',
      /^never fires( from now on)?: no occurrence from start_date to the end of year 9999/,
    ],
  ])('%j is refused on %s, saying why, and nothing is made', async (schedule, field, message) => {
    const h = harness({ minIntervalS: 5, perUser: 5 });
    expect(await refusalOf(h.service.create(owner, 'agent', { prompt: 'Hi', schedule }))).toMatchObject({
      code: 'BAD_USER_INPUT',
      field,
      message: expect.stringMatching(message),
    });
    expect(h.db.triggers.size).toBe(0);
    expect(h.queue).toEqual([]);
  });

  it('an end date already past never fires, on the clock the rules are given', async () => {
    const h = harness({ minIntervalS: 5, perUser: 5 });
    const schedule = { second: '0', endDate: '2027-02-28T00:00:00Z' };
    expect(await refusalOf(h.service.create(owner, 'agent', { prompt: 'Hi', schedule }))).toMatchObject({
      field: 'schedule.endDate',
      message: expect.stringMatching(/^never fires/),
    });
  });

  it.each([
    [{ prompt: 'x', schedule: null, sessionTarget: 'existing' }, 'sessionId', /required/],
    [{ prompt: 'x', schedule: null, sessionTarget: 'sometimes' }, 'sessionTarget', /./],
  ])('%j is refused on %s', async (input, field, message) => {
    const h = harness();
    expect(await refusalOf(h.service.create(owner, 'agent', input))).toMatchObject({ field, message: expect.stringMatching(message) });
    expect(h.db.triggers.size).toBe(0);
  });

  it('a change to a schedule that is refused changes nothing, and leaves the cap as it was', async () => {
    const h = harness({ minIntervalS: 5, perUser: 2 });
    const made = await h.service.create(owner, 'agent', { prompt: 'Hi', schedule: null });
    const before = structuredClone(h.db.triggers.get(made.id));
    const schedule = { second: '0', startDate: '1969-12-31T23:59:59Z' };
    for (let i = 0; i < 3; i++)
      expect(await refusalOf(h.service.create(owner, 'agent', { prompt: 'Hi', schedule }))).toMatchObject({ field: 'schedule.startDate' });
    expect(await refusalOf(h.service.update(owner, made.id, { schedule }))).toMatchObject({ field: 'schedule.startDate' });
    expect(h.db.triggers.get(made.id)).toEqual(before);
    await h.service.create(owner, 'agent', { prompt: 'Hi', schedule: null });
    expect(h.db.triggers.size).toBe(2);
  });
});

describe('firing', () => {
  it('runs each occurrence once, as the owner’s prompt in a new session titled after the trigger, and links the reply', async () => {
    const h = harness();
    const t = await h.service.create(owner, 'agent', {
      name: 'Digest',
      prompt: 'Summarise',
      context: 'Be brief',
      schedule: everyTenSeconds,
    });
    expect(t.nextRun?.toISOString()).toBe('2027-03-01T12:00:10.000Z');
    // Delivered twice (a queue may), it still runs once.
    h.queue.push({ ...h.queue[0]! });
    await h.at('2027-03-01T12:00:10.000Z');
    expect(h.prompts).toHaveLength(1);
    expect(h.prompts[0]!.viewer).toEqual({ id: owner.id });
    expect(h.prompts[0]!.input).toEqual({ agentIds: ['agent'], content: 'Summarise\n\nBe brief', title: 'Digest' });
    expect(h.trigger(t.id)).toMatchObject({ runningRunId: expect.any(String), nextRun: new Date('2027-03-01T12:00:20.000Z') });
    await h.reply('prompt-1');
    const [run] = h.runsOf(t.id);
    expect(run).toMatchObject({
      status: 'completed',
      scheduledFor: new Date('2027-03-01T12:00:10.000Z'),
      sessionId: 'session-1',
      messageId: 'reply-1',
    });
    expect(h.trigger(t.id)).toMatchObject({ runningRunId: null, lastRunTime: new Date('2027-03-01T12:00:10.000Z'), errorCount: 0 });
    expect(h.told.map((e) => e.type)).toEqual(['trigger_changed', 'trigger_run_started', 'trigger_run_completed']);

    await h.at('2027-03-01T12:00:20.000Z');
    await h.reply('prompt-2');
    await h.at('2027-03-01T12:00:30.000Z');
    expect(h.runsOf(t.id).map((r) => r.scheduledFor?.toISOString())).toEqual([
      '2027-03-01T12:00:10.000Z',
      '2027-03-01T12:00:20.000Z',
      '2027-03-01T12:00:30.000Z',
    ]);
  });

  it('an occurrence due hours ahead waits off the queue until the sweep brings it near, then runs once', async () => {
    const h = harness();
    const t = await h.service.create(owner, 'agent', { prompt: 'Daily', schedule: { second: '0', minute: '0', hour: '18' } });
    expect(t.nextRun?.toISOString()).toBe('2027-03-01T18:00:00.000Z');
    expect(h.queue.filter((q) => q.job.kind === 'occurrence')).toEqual([]);
    // Within QUEUE_AHEAD_MS of 18:00 the sweep queues it, once however often it sweeps.
    await h.at('2027-03-01T17:58:00.000Z');
    await h.at('2027-03-01T17:59:00.000Z');
    expect(h.queue.map((q) => q.job)).toEqual([{ kind: 'occurrence', triggerId: t.id, scheduledFor: '2027-03-01T18:00:00.000Z' }]);
    await h.at('2027-03-01T18:00:00.000Z');
    expect(h.prompts).toHaveLength(1);
    // Its next occurrence, a day ahead, sends no job from the run either.
    expect(h.queue.filter((q) => q.job.kind === 'occurrence')).toEqual([]);
    expect(h.trigger(t.id).nextRun?.toISOString()).toBe('2027-03-02T18:00:00.000Z');
  });

  it('after an outage runs once to catch up, then keeps its schedule', async () => {
    const h = harness();
    const t = await h.service.create(owner, 'agent', { prompt: 'Tick', schedule: everyTenSeconds });
    // Nothing handled the queue from 12:00:10 to 12:01:05: six occurrences passed.
    await h.at('2027-03-01T12:01:05.000Z');
    expect(h.prompts).toHaveLength(1);
    await h.reply('prompt-1');
    // One run for everything missed; the occurrence of the last 10 s (12:01:00) is only late, and runs too.
    await h.at('2027-03-01T12:01:05.500Z');
    await h.reply('prompt-2');
    expect(h.runsOf(t.id).map((r) => r.scheduledFor?.toISOString())).toEqual(['2027-03-01T12:00:10.000Z', '2027-03-01T12:01:00.000Z']);
    expect(h.trigger(t.id).nextRun?.toISOString()).toBe('2027-03-01T12:01:10.000Z');
    await h.at('2027-03-01T12:01:10.000Z');
    expect(h.prompts).toHaveLength(3);
  });

  it('a job only seconds late still runs every occurrence it is late for, once each', async () => {
    const h = harness();
    const t = await h.service.create(owner, 'agent', { prompt: 'Tick', schedule: { second: '*/2' } });
    // The 12:00:02 job is handled at 12:00:05 (a busy instance): 12:00:04 is late, not missed.
    await h.at('2027-03-01T12:00:05.000Z');
    await h.reply('prompt-1');
    await h.at('2027-03-01T12:00:05.100Z');
    await h.reply('prompt-2');
    await h.at('2027-03-01T12:00:06.000Z');
    expect(h.runsOf(t.id).map((r) => r.scheduledFor?.toISOString())).toEqual([
      '2027-03-01T12:00:02.000Z',
      '2027-03-01T12:00:04.000Z',
      '2027-03-01T12:00:06.000Z',
    ]);
  });

  it('an occurrence due while a run goes on waits for it, then runs once', async () => {
    const h = harness();
    const t = await h.service.create(owner, 'agent', { prompt: 'Slow', schedule: everyTenSeconds });
    await h.at('2027-03-01T12:00:10.000Z');
    await h.at('2027-03-01T12:00:21.000Z');
    expect(h.prompts).toHaveLength(1);
    await h.reply('prompt-1');
    await h.at('2027-03-01T12:00:21.500Z');
    expect(h.prompts).toHaveLength(2);
    expect(h.runsOf(t.id).map((r) => r.scheduledFor?.toISOString())).toEqual(['2027-03-01T12:00:10.000Z', '2027-03-01T12:00:20.000Z']);
  });

  it('past its end date it is finished', async () => {
    const h = harness();
    const t = await h.service.create(owner, 'agent', {
      prompt: 'Twice',
      schedule: { ...everyTenSeconds, endDate: '2027-03-01T12:00:25.000Z' },
    });
    await h.at('2027-03-01T12:00:10.000Z');
    await h.reply('prompt-1');
    await h.at('2027-03-01T12:00:20.000Z');
    expect(h.trigger(t.id)).toMatchObject({ status: 'finished', nextRun: null });
    await h.reply('prompt-2');
    expect(h.told.at(-1)).toMatchObject({ type: 'trigger_finished', triggerId: t.id });
    await h.at('2027-03-01T12:01:00.000Z');
    expect(h.prompts).toHaveLength(2);
  });
});

describe('failures', () => {
  it('are recorded with their reason; two in a row pause the trigger and tell its owner; a success in between resets the count', async () => {
    const h = harness();
    const t = await h.service.create(owner, 'agent', { prompt: 'Risky', schedule: everyTenSeconds });
    await h.at('2027-03-01T12:00:10.000Z');
    await h.reply('prompt-1', { status: 'failed', error: 'The model failed: 500' });
    expect(h.trigger(t.id)).toMatchObject({ errorCount: 1, lastError: 'The model failed: 500', status: 'active' });
    await h.at('2027-03-01T12:00:20.000Z');
    await h.reply('prompt-2');
    expect(h.trigger(t.id).errorCount).toBe(0);

    // The balance could not pay for a tool the reply used: a failure too.
    await h.at('2027-03-01T12:00:30.000Z');
    await h.reply('prompt-3', { status: 'complete', toolErrors: ['Not enough manna: this call costs 4, the balance is 1'] });
    h.refusals.push(badInput('Session manna budget exceeded'));
    await h.at('2027-03-01T12:00:40.000Z');
    expect(h.runsOf(t.id).map((r) => [r.status, r.error])).toEqual([
      ['failed', 'The model failed: 500'],
      ['completed', null],
      ['failed', 'Not enough manna: this call costs 4, the balance is 1'],
      ['failed', 'Session manna budget exceeded'],
    ]);
    expect(h.trigger(t.id)).toMatchObject({ status: 'paused', nextRun: null, errorCount: 2 });
    expect(h.told.filter((e) => e.type === 'trigger_paused')).toEqual([
      expect.objectContaining({ triggerId: t.id, reason: 'failures', message: expect.stringContaining('Session manna budget exceeded') }),
    ]);
    await h.at('2027-03-01T12:01:30.000Z');
    expect(h.runsOf(t.id)).toHaveLength(4);

    // Resumed: the next run from now, the failures forgotten.
    const resumed = await h.service.update(owner, t.id, { status: 'active' });
    expect(resumed).toMatchObject({ status: 'active', errorCount: 0, nextRun: new Date('2027-03-01T12:01:40.000Z') });
  });

  it('a session gone from an existing-session trigger fails the run with the reason', async () => {
    const h = harness();
    h.db.sessions.set('mine', { ownerId: owner.id, agentIds: ['agent'] });
    const t = await h.service.create(owner, 'agent', { prompt: 'Into it', schedule: everyTenSeconds, sessionId: 'mine' });
    h.db.sessions.set('mine', { ownerId: stranger.id, agentIds: ['agent'] });
    await h.at('2027-03-01T12:00:10.000Z');
    h.db.sessions.delete('mine');
    await h.at('2027-03-01T12:00:20.000Z');
    expect(h.runsOf(t.id).map((r) => r.error)).toEqual([
      'The session this trigger posts into is no longer yours',
      'The session this trigger posts into was deleted',
    ]);
    expect(h.prompts).toEqual([]);
    expect(h.trigger(t.id).status).toBe('paused');
  });

  it('a run stuck past the time limit is failed, its reply stopped, and the trigger released', async () => {
    const h = harness();
    const t = await h.service.create(owner, 'agent', { prompt: 'Hang', schedule: null });
    await h.service.runNow(owner, t.id);
    expect(await refusalOf(h.service.runNow(owner, t.id))).toMatchObject({ code: 'CONFLICT', message: 'This trigger is already running' });
    await h.at('2027-03-01T12:01:00.001Z');
    expect(h.runsOf(t.id)[0]).toMatchObject({ status: 'failed', error: 'The run took longer than 60 s and was stopped' });
    expect(h.cancelled).toEqual(['prompt-1']);
    expect(h.trigger(t.id).runningRunId).toBeNull();
    await h.service.runNow(owner, t.id);
    expect(h.prompts).toHaveLength(2);
  });
});

describe('an instance that dies mid-run', () => {
  it('between the claim and the prompt: after the lease, another sends the prompt once, and the next occurrence runs after it', async () => {
    const h = harness();
    const t = await h.service.create(owner, 'agent', { prompt: 'Orphan', schedule: everyTenSeconds });
    // What a dead instance leaves: the occurrence claimed, its prompt never sent.
    await memoryClaim(h, t.id, '2027-03-01T12:00:10.000Z', '2027-03-01T12:00:20.000Z');
    await h.at('2027-03-01T12:00:20.000Z');
    expect(h.prompts).toEqual([]);
    // Past the lease (10 s here) the 12:00:20 occurrence, waiting on it, sends its prompt: once.
    await h.at('2027-03-01T12:00:22.500Z');
    expect(h.prompts.map((p) => p.input.content)).toEqual(['Orphan']);
    await h.at('2027-03-01T12:00:25.000Z');
    expect(h.prompts).toHaveLength(1);
    await h.reply('prompt-1');
    await h.at('2027-03-01T12:00:25.500Z');
    expect(h.runsOf(t.id).map((r) => [r.scheduledFor?.toISOString(), r.status])).toEqual([
      ['2027-03-01T12:00:10.000Z', 'completed'],
      ['2027-03-01T12:00:20.000Z', 'running'],
    ]);
  });
});

describe('an instance that dies between the claim and queueing the next occurrence', () => {
  it('the occurrence’s job, tried again on another instance, queues the next one at once, not at the next sweep', async () => {
    const h = harness();
    const t = await h.service.create(owner, 'agent', { prompt: 'Orphan', schedule: everyTenSeconds });
    await memoryClaim(h, t.id, '2027-03-01T12:00:10.000Z', '2027-03-01T12:00:20.000Z');
    h.queue.splice(0);
    // The queue hands the dead instance's job to another (no sweep runs in between).
    await h.runner.handle({ kind: 'occurrence', triggerId: t.id, scheduledFor: '2027-03-01T12:00:10.000Z' });
    expect(h.queue.map((q) => [q.at.toISOString(), q.job])).toEqual([
      ['2027-03-01T12:00:20.000Z', { kind: 'occurrence', triggerId: t.id, scheduledFor: '2027-03-01T12:00:20.000Z' }],
    ]);
    expect(h.runsOf(t.id)).toHaveLength(1);
  });
});

/** Claims an occurrence as an instance would just before it died (no prompt sent, no job for the run's end). */
async function memoryClaim(h: ReturnType<typeof harness>, triggerId: string, scheduledFor: string, next: string) {
  h.db.runs.set('orphan', {
    id: 'orphan',
    triggerId,
    scheduledFor: new Date(scheduledFor),
    status: 'running',
    error: null,
    sessionId: null,
    messageId: null,
    startedAt: new Date(scheduledFor),
    finishedAt: null,
  });
  const t = h.db.triggers.get(triggerId)!;
  h.db.triggers.set(triggerId, {
    ...t,
    runningRunId: 'orphan',
    runningSince: new Date(scheduledFor),
    lastRunTime: new Date(scheduledFor),
    nextRun: new Date(next),
  });
  h.queue.splice(0, h.queue.length, { at: new Date(next), job: { kind: 'occurrence', triggerId, scheduledFor: next } });
}

describe('changes', () => {
  it('pausing drops the next run (its job then does nothing); a new schedule replaces the next run', async () => {
    const h = harness();
    const t = await h.service.create(owner, 'agent', { prompt: 'Tick', schedule: everyTenSeconds });
    const paused = await h.service.update(owner, t.id, { status: 'paused' });
    expect(paused).toMatchObject({ status: 'paused', nextRun: null });
    expect(h.told.at(-1)).toMatchObject({ type: 'trigger_paused', reason: 'owner' });
    await h.at('2027-03-01T12:00:30.000Z');
    expect(h.prompts).toEqual([]);
    const rescheduled = await h.service.update(owner, t.id, { status: 'active', schedule: { second: '0', minute: '*/5' } });
    expect(rescheduled.nextRun?.toISOString()).toBe('2027-03-01T12:05:00.000Z');
    await h.at('2027-03-01T12:05:00.000Z');
    expect(h.prompts).toHaveLength(1);
  });

  it('deleting a trigger ends it: its due job finds nothing', async () => {
    const h = harness();
    const t = await h.service.create(owner, 'agent', { prompt: 'Tick', schedule: everyTenSeconds });
    await h.service.remove(owner, t.id);
    await h.at('2027-03-01T12:00:30.000Z');
    expect(h.prompts).toEqual([]);
    expect(h.told.at(-1)).toMatchObject({ type: 'trigger_changed', change: 'deleted' });
  });
});
