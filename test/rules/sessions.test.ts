import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import type { Viewer } from '../../src/domain/core/viewer.ts';
import type { ReplyJob } from '../../src/domain/replies/engine.ts';
import { accessGate } from '../../src/domain/access/gate.ts';
import { AUTO_REPLY_NEEDS_BUDGET, autonomyRules, TURN_QUEUE } from '../../src/domain/autonomy/service.ts';
import { sessionService } from '../../src/domain/sessions/service.ts';
import { signalOutbox } from '../../src/domain/signals/service.ts';
import { shareService } from '../../src/domain/shares/service.ts';
import { memorySlotStore } from '../../src/limits/slots.ts';
import { streamLimits } from '../../src/limits/streams.ts';
import { createMemoryBus } from '../../src/realtime/memory-bus.ts';
import { inMemoryJobQueue } from '../domain/in-memory-jobs.ts';
import {
  inMemoryAutonomyStore,
  inMemoryShareStore,
  inMemorySessionStore,
  inMemorySignalStore,
  inMemoryWatchAccessStore,
  World,
} from '../domain/in-memory-session-stores.ts';
import { publishedSince } from './support/published.ts';

// The session permission matrix, on the rules alone: the services over in-memory stores and the
// in-process bus, with no app and no database. Each cell starts from the same session and
// checks what the caller gets back, what the store holds after, and what watchers were told.

const config = loadConfig({});
const quiet = { warn: () => {}, error: () => {} };

/** A session of Olivia's with Ada: Cora added as owner, Eddie and Dave as editors; Sam is not in it. */
function arrange() {
  const world = new World(() => new Date());
  const [olivia, cora, eddie, dave, sam, nina] = ['olivia', 'cora', 'eddie', 'dave', 'sam', 'nina'].map((n) => world.user(n));
  const ada = world.agent('Ada', olivia!.id);
  const session = world.session(olivia!.id, [ada.id], { title: 'Harbour talk' });
  session.members.set(cora!.id, 'owner').set(eddie!.id, 'editor').set(dave!.id, 'editor');
  world.message(session.id, { role: 'eden', content: 'Ada joined the session' });
  const hello = world.message(session.id, { role: 'user', senderId: olivia!.id, content: 'Hello' });
  const answer = world.message(session.id, { role: 'assistant', senderId: ada.id, promptId: hello.id, content: 'Hello, Olivia' });
  const tide = world.message(session.id, { role: 'user', senderId: eddie!.id, content: 'And the tide?' });
  world.message(session.id, { role: 'assistant', senderId: ada.id, promptId: tide.id, status: 'streaming' });

  const bus = createMemoryBus(config.events);
  const started: ReplyJob[] = [];
  const cancels: unknown[] = [];
  bus.onCancelReplies((request) => cancels.push(request));
  const replies = {
    instanceId: 'test-instance',
    start: async (job: ReplyJob) => {
      started.push(job);
    },
  };
  const gate = accessGate(inMemoryWatchAccessStore(world), config.events.accessRecheckMs, quiet);
  const jobs = inMemoryJobQueue();
  const autonomy = autonomyRules({ store: inMemoryAutonomyStore(world), bus, jobs: jobs.queue, replies, log: quiet });
  const sessions = sessionService(
    inMemorySessionStore(world),
    bus,
    replies,
    config.work,
    streamLimits(memorySlotStore(), config.limits, quiet),
    {
      gate,
      signals: signalOutbox(inMemorySignalStore(world), bus, quiet),
      autonomy,
    },
  );
  const shares = shareService(inMemoryShareStore(world), sessions);
  const viewers = {
    owner: { id: olivia!.id },
    'member added as owner': { id: cora!.id },
    editor: { id: eddie!.id },
    stranger: { id: sam!.id },
  } satisfies Record<string, Viewer>;
  return { world, bus, gate, jobs, autonomy, started, cancels, sessions, shares, viewers, session, ada, answer, dave: dave!, nina: nina! };
}
type Arranged = ReturnType<typeof arrange>;
type Role = keyof Arranged['viewers'];

interface Action {
  run(a: Arranged, viewer: Viewer): Promise<unknown>;
  /** What a permitted caller sees: the answer, the store after, and the events published. */
  allowed(a: Arranged, viewer: Viewer, result: unknown, events: string[]): void;
}

const actions: Record<string, Action> = {
  send: {
    run: (a, v) => a.sessions.send(v, { sessionId: a.session.id, content: 'Ada, how high is the tide?' }),
    allowed(a, v, result, events) {
      expect(result).toMatchObject({
        sessionId: a.session.id,
        created: false,
        message: { content: 'Ada, how high is the tide?', senderId: v.id },
      });
      expect((result as { replies: { agentId: string }[] }).replies.map((r) => r.agentId)).toEqual([a.ada.id]);
      expect(a.started.map((job) => [job.promptId, job.userId])).toEqual([[(result as { promptId: string }).promptId, v.id]]);
      expect(events).toEqual(['start_prompt']);
    },
  },
  react: {
    run: (a, v) => a.sessions.react(v, { messageId: a.answer.id, reaction: 'thumbs_up' }),
    allowed(a, v, result, events) {
      expect(result).toEqual({ added: true, messageId: a.answer.id, reactions: { [v.id]: ['thumbs_up'] } });
      expect(events).toEqual(['reaction']);
    },
  },
  rename: {
    run: (a, v) => a.sessions.update(v, a.session.id, { title: 'Tides' }),
    allowed(a, _v, result, events) {
      expect(result).toBeUndefined();
      expect(a.world.sessions.get(a.session.id)!.title).toBe('Tides');
      expect(events).toEqual(['session_updated']);
    },
  },
  cancel: {
    run: (a, v) => a.sessions.cancel(v, a.session.id),
    allowed(a, _v, result, events) {
      expect(result).toBe(1);
      expect(a.cancels).toEqual([{ sessionId: a.session.id, reason: 'cancelled' }]);
      expect(events).toEqual([]);
    },
  },
  delete: {
    run: (a, v) => a.sessions.delete(v, a.session.id),
    allowed(a, _v, _result, events) {
      expect(a.world.sessions.has(a.session.id)).toBe(false);
      expect(a.world.messages.filter((m) => m.sessionId === a.session.id)).toEqual([]);
      expect(a.cancels).toEqual([{ sessionId: a.session.id, reason: 'deleted' }]);
      expect(events).toEqual(['session_deleted']);
      // Delivered to the bus, so nothing waits in the outbox.
      expect(a.world.signals.size).toBe(0);
    },
  },
  'add a user': {
    run: (a, v) => a.sessions.addUser(v, a.session.id, { username: 'nina', permission: 'editor' }),
    allowed(a, _v, result, events) {
      expect(result).toEqual({ userId: a.nina.id, permission: 'editor' });
      expect(a.world.sessions.get(a.session.id)!.members.get(a.nina.id)).toBe('editor');
      expect(events).toEqual(['user_added']);
    },
  },
  'remove a user': {
    run: (a, v) => a.sessions.removeUser(v, a.session.id, a.dave.id),
    allowed(a, _v, _result, events) {
      expect(a.world.sessions.get(a.session.id)!.members.has(a.dave.id)).toBe(false);
      expect(events).toEqual(['user_removed']);
      expect(a.world.signals.size).toBe(0);
    },
  },
  share: {
    run: (a, v) => a.shares.create(v, a.session.id),
    allowed(a, _v, result, events) {
      expect(result).toMatchObject({ title: 'Harbour talk', owner: expect.any(Object), session: { id: a.session.id } });
      // Up to the latest finished message: the reply still being written is left out.
      const messages = (result as { messages: { content: string }[] }).messages;
      expect(messages.map((m) => m.content)).toEqual(['Ada joined the session', 'Hello', 'Hello, Olivia', 'And the tide?']);
      expect(a.world.shares).toHaveLength(1);
      expect(events).toEqual([]);
    },
  },
};

const ok = 'allowed' as const;
const refused = (code: string, message: string) => ({ code, message });
const NO_ACCESS = refused('FORBIDDEN', 'You do not have access to this session');
const NOT_DELETABLE = refused('FORBIDDEN', 'You are not allowed to delete this session');
const OWNERS_MANAGE = refused('FORBIDDEN', 'Only an owner of this session can add or remove users');
const OWNERS_CHANGE = refused('FORBIDDEN', 'Only an owner of this session can change its title, scenario or budget');

const matrix: Record<Role, Record<keyof typeof actions, typeof ok | { code: string; message: string }>> = {
  owner: { send: ok, react: ok, rename: ok, cancel: ok, delete: ok, 'add a user': ok, 'remove a user': ok, share: ok },
  'member added as owner': { send: ok, react: ok, rename: ok, cancel: ok, delete: ok, 'add a user': ok, 'remove a user': ok, share: ok },
  editor: {
    send: ok,
    react: ok,
    rename: OWNERS_CHANGE,
    cancel: ok,
    delete: NOT_DELETABLE,
    'add a user': OWNERS_MANAGE,
    'remove a user': OWNERS_MANAGE,
    share: refused('FORBIDDEN', 'Only an owner of this session can share it'),
  },
  stranger: {
    send: NO_ACCESS,
    react: NO_ACCESS,
    rename: NO_ACCESS,
    cancel: NO_ACCESS,
    delete: NOT_DELETABLE,
    'add a user': NO_ACCESS,
    'remove a user': NO_ACCESS,
    share: NO_ACCESS,
  },
};

let arranged: Arranged | undefined;
afterEach(async () => {
  arranged?.gate.stop();
  await arranged?.bus.close();
  arranged = undefined;
});

describe('the session permission matrix, on the rules over an in-memory store', () => {
  for (const [role, row] of Object.entries(matrix) as [Role, (typeof matrix)[Role]][]) {
    for (const [name, expected] of Object.entries(row)) {
      it(`${role} × ${name}: ${expected === ok ? 'allowed' : `${expected.code} "${expected.message}"`}`, async () => {
        const a = (arranged = arrange());
        const viewer = a.viewers[role];
        const action = actions[name]!;
        const before = a.world.snapshot();
        const seq = await a.bus.position(a.session.id);
        if (expected === ok) {
          const result = await action.run(a, viewer);
          action.allowed(a, viewer, result, await publishedSince(a.bus, a.session.id, seq));
        } else {
          await expect(action.run(a, viewer)).rejects.toMatchObject(expected);
          // Refused: nothing stored, nothing told to watchers, no reply started or stopped.
          expect(a.world.snapshot()).toEqual(before);
          expect(await publishedSince(a.bus, a.session.id, seq)).toEqual([]);
          expect([a.started, a.cancels]).toEqual([[], []]);
        }
      });
    }
  }

  it('a session that does not exist is NOT_FOUND for every action, and a message that does not exist too', async () => {
    const a = (arranged = arrange());
    const owner = a.viewers.owner;
    const missing = randomUUID();
    const notFound = refused('NOT_FOUND', 'Session not found');
    await expect(a.sessions.send(owner, { sessionId: missing, content: 'Hi' })).rejects.toMatchObject(notFound);
    await expect(a.sessions.update(owner, missing, { title: 'Tides' })).rejects.toMatchObject(notFound);
    await expect(a.sessions.cancel(owner, missing)).rejects.toMatchObject(notFound);
    await expect(a.sessions.delete(owner, missing)).rejects.toMatchObject(notFound);
    await expect(a.sessions.addUser(owner, missing, { username: 'nina', permission: 'editor' })).rejects.toMatchObject(notFound);
    await expect(a.sessions.removeUser(owner, missing, a.dave.id)).rejects.toMatchObject(notFound);
    await expect(a.shares.create(owner, missing)).rejects.toMatchObject(notFound);
    await expect(a.sessions.react(owner, { messageId: missing, reaction: 'thumbs_up' })).rejects.toMatchObject(
      refused('NOT_FOUND', 'Message not found'),
    );
  });

  it('anyone in a session may leave it, except its owner', async () => {
    const a = (arranged = arrange());
    await expect(a.sessions.removeUser(a.viewers.owner, a.session.id, a.viewers.owner.id)).rejects.toMatchObject(
      refused('BAD_USER_INPUT', "The session's owner cannot be removed"),
    );
    await expect(a.sessions.removeUser(a.viewers.stranger, a.session.id, a.viewers.stranger.id)).rejects.toMatchObject(NO_ACCESS);
    for (const role of ['editor', 'member added as owner'] as const) {
      await a.sessions.removeUser(a.viewers[role], a.session.id, a.viewers[role].id);
      await expect(a.sessions.permissionIn(a.viewers[role], a.session.id)).resolves.toBeNull();
    }
  });
});

describe("changing a session's settings on their own (PATCH /v2/sessions/:id, updateSession), on the rules", () => {
  it('checks the fields as a prompt does, naming the field, and changes nothing when one is wrong', async () => {
    const a = (arranged = arrange());
    const before = a.world.snapshot();
    const seq = await a.bus.position(a.session.id);
    await expect(a.sessions.update(a.viewers.owner, a.session.id, { title: 'x'.repeat(1001) })).rejects.toMatchObject({
      code: 'BAD_USER_INPUT',
      fieldPath: ['title'],
    });
    await expect(a.sessions.update(a.viewers.owner, a.session.id, { budget: { turnBudget: 0 } })).rejects.toMatchObject({
      code: 'BAD_USER_INPUT',
      fieldPath: ['budget', 'turnBudget'],
    });
    await expect(
      a.sessions.update(a.viewers.owner, a.session.id, {
        autonomySettings: { autoReply: true, replyInterval: 5, actorSelectionMethod: 'random' },
      }),
    ).rejects.toMatchObject(refused('BAD_USER_INPUT', AUTO_REPLY_NEEDS_BUDGET));
    expect(a.world.snapshot()).toEqual(before);
    expect(await publishedSince(a.bus, a.session.id, seq)).toEqual([]);
  });

  it('sets the scenario and budgets, and with a budget starts the autonomous loop; turning it off stops it and says why', async () => {
    const a = (arranged = arrange());
    await a.autonomy.startWork();
    const seq = await a.bus.position(a.session.id);
    const on = { autoReply: true, replyInterval: 30, actorSelectionMethod: 'random' } as const;
    await a.sessions.update(a.viewers.owner, a.session.id, { scenario: 'At the harbour', budget: { turnBudget: 3 }, autonomySettings: on });
    expect(a.world.sessions.get(a.session.id)).toMatchObject({
      scenario: 'At the harbour',
      turnBudget: 3,
      autoReply: true,
      replyInterval: 30,
      actorSelection: 'random',
    });
    expect(await a.jobs.queue.waiting(TURN_QUEUE, a.session.id)).toBe(true);
    await a.sessions.update(a.viewers.owner, a.session.id, { autonomySettings: { ...on, autoReply: false } });
    expect(a.world.sessions.get(a.session.id)!.autoReply).toBe(false);
    expect(await a.jobs.queue.waiting(TURN_QUEUE, a.session.id)).toBe(false);
    expect(await publishedSince(a.bus, a.session.id, seq)).toEqual(['session_updated', 'session_updated', 'autonomy_stopped']);
  });

  it('a change of nothing changes nothing and tells no one, for anyone who may post', async () => {
    const a = (arranged = arrange());
    const before = a.world.snapshot();
    const seq = await a.bus.position(a.session.id);
    await a.sessions.update(a.viewers.editor, a.session.id, { budget: {} });
    expect(a.world.snapshot()).toEqual(before);
    expect(await publishedSince(a.bus, a.session.id, seq)).toEqual([]);
    await expect(a.sessions.update(a.viewers.stranger, a.session.id, {})).rejects.toMatchObject(NO_ACCESS);
  });
});

describe('what a prompt’s input may be', () => {
  const badInput = (message: string | RegExp, fieldPath?: (string | number)[]) =>
    expect.objectContaining({
      code: 'BAD_USER_INPUT',
      message: typeof message === 'string' ? message : expect.stringMatching(message),
      fieldPath,
    });

  it.each([
    ['no agents for a new session', {}, badInput('agent_ids must be provided when creating a new session')],
    ['an empty list of agents', { agentIds: [] }, badInput('agent_ids must be provided when creating a new session')],
    ['an agent named twice', { agentIds: ['ada', 'ada'] }, badInput(/^must not name an agent twice/, ['agentIds'])],
    ['content that is no text', { agentIds: ['ada'], content: 5 }, badInput(/./, ['content'])],
    [
      'a turn budget over 1000',
      { agentIds: ['ada'], budget: { turnBudget: 1001 } },
      badInput('must be at most 1000', ['budget', 'turnBudget']),
    ],
    [
      'a turn budget not whole',
      { agentIds: ['ada'], budget: { turnBudget: 2.5 } },
      badInput('must be a whole number', ['budget', 'turnBudget']),
    ],
    [
      'a token budget under 1000',
      { agentIds: ['ada'], budget: { tokenBudget: 999 } },
      badInput('must be at least 1000', ['budget', 'tokenBudget']),
    ],
    [
      'a manna budget over 50000',
      { agentIds: ['ada'], budget: { mannaBudget: 50001 } },
      badInput('must be at most 50000', ['budget', 'mannaBudget']),
    ],
    [
      'a title over 1000 characters',
      { agentIds: ['ada'], title: 'x'.repeat(1001) },
      badInput('must be at most 1000 characters', ['title']),
    ],
    [
      'a scenario over 1000 characters',
      { agentIds: ['ada'], scenario: 'x'.repeat(1001) },
      badInput('must be at most 1000 characters', ['scenario']),
    ],
    [
      'an attachment that is no web address',
      { agentIds: ['ada'], attachments: ['javascript:alert(1)'] },
      badInput(/./, ['attachments', 0]),
    ],
    [
      'an interval over an hour',
      { agentIds: ['ada'], autonomySettings: { autoReply: false, replyInterval: 3601, actorSelectionMethod: 'random' } },
      badInput('must be at most 3600', ['autonomySettings', 'replyInterval']),
    ],
    [
      'a negative interval',
      { agentIds: ['ada'], autonomySettings: { autoReply: false, replyInterval: -1, actorSelectionMethod: 'random' } },
      badInput('must be at least 0', ['autonomySettings', 'replyInterval']),
    ],
    [
      'an unknown way to choose who speaks',
      { agentIds: ['ada'], autonomySettings: { autoReply: false, replyInterval: 0, actorSelectionMethod: 'round_robin' } },
      badInput(/^must be one of/, ['autonomySettings', 'actorSelectionMethod']),
    ],
    [
      'auto-reply that is no boolean',
      { agentIds: ['ada'], autonomySettings: { autoReply: 'yes', replyInterval: 0, actorSelectionMethod: 'random' } },
      badInput('must be true or false', ['autonomySettings', 'autoReply']),
    ],
    [
      'autonomy without its method',
      { agentIds: ['ada'], autonomySettings: { autoReply: true, replyInterval: 0 } },
      badInput(/./, ['autonomySettings', 'actorSelectionMethod']),
    ],
  ])('refuses %s, naming the field, and makes nothing', async (_label, input, refusal) => {
    const a = (arranged = arrange());
    const raw = { ...input, agentIds: (input as { agentIds?: string[] }).agentIds?.map((id) => (id === 'ada' ? a.ada.id : id)) };
    const before = a.world.snapshot();
    await expect(a.sessions.send(a.viewers.owner, raw)).rejects.toEqual(refusal);
    expect(a.world.snapshot()).toEqual(before);
    expect(a.started).toEqual([]);
  });

  it('takes only agents the caller may use, naming the one at fault, and in a session only its own agents', async () => {
    const a = (arranged = arrange());
    const hidden = a.world.agent('Hidden', a.viewers.stranger.id, false);
    const before = a.world.snapshot();
    await expect(a.sessions.send(a.viewers.owner, { agentIds: ['no-such-agent'], content: 'hi' })).rejects.toEqual(
      badInput('agent not found or not usable by you', ['agentIds', 0]),
    );
    await expect(a.sessions.send(a.viewers.owner, { agentIds: [a.ada.id, hidden.id], content: 'hi' })).rejects.toEqual(
      badInput('agent not found or not usable by you', ['agentIds', 1]),
    );
    await expect(a.sessions.send(a.viewers.owner, { sessionId: a.session.id, agentIds: [hidden.id], content: 'x' })).rejects.toEqual(
      badInput('agent is not in this session', ['agentIds', 0]),
    );
    expect(a.world.snapshot()).toEqual(before);
  });

  it('refuses auto-reply without a budget, and lets only an owner change a session’s settings', async () => {
    const a = (arranged = arrange());
    const on = { autoReply: true, replyInterval: 0, actorSelectionMethod: 'random' };
    const before = a.world.snapshot();
    await expect(a.sessions.send(a.viewers.owner, { agentIds: [a.ada.id], content: 'Hello', autonomySettings: on })).rejects.toMatchObject({
      code: 'BAD_USER_INPUT',
      message: 'Session cannot have auto-reply enabled without a set budget',
    });
    await expect(a.sessions.send(a.viewers.editor, { sessionId: a.session.id, title: 'Mine now' })).rejects.toMatchObject(
      refused('FORBIDDEN', 'Only an owner of this session can change its title, scenario or budget'),
    );
    expect(a.world.snapshot()).toEqual(before);
  });
});
