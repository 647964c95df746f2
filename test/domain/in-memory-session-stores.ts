import { randomUUID } from 'node:crypto';
import { numberedCut, rowsThatFit } from '../../src/domain/core/byte-pages.ts';
import type { MessageView } from '../../src/domain/core/events.ts';
import type { AutonomyStore } from '../../src/domain/autonomy/store.ts';
import type { ActorSelection } from '../../src/generated/prisma/enums.ts';
import { reactionsView } from '../../src/domain/core/views.ts';
import type { Permission } from '../../src/domain/access/service.ts';
import type { WatchAccessStore } from '../../src/domain/access/store.ts';
import type { Signal } from '../../src/domain/signals/service.ts';
import type { SignalStore } from '../../src/domain/signals/store.ts';
import {
  BudgetStop,
  KeyGone,
  type MessageWindow,
  type NewSessionAgent,
  ReactionLimitReached,
  type SavedNewSession,
  type SessionFilter,
  type SessionQuery,
  type SessionRead,
  type SessionSettings,
  type SessionStore,
} from '../../src/domain/sessions/store.ts';
import type { ShareStore } from '../../src/domain/shares/store.ts';

/**
 * Stores that keep sessions, messages, reactions, shares and the signal outbox in maps, for
 * testing the rules without a database. Each operation finishes without awaiting anything once
 * it starts changing state, so each is as indivisible as the Prisma store's transactions.
 */

export interface MemUser {
  id: string;
  username: string;
  type: 'user' | 'agent';
}
export interface MemAgent {
  id: string;
  name: string;
  ownerId: string;
  public: boolean;
}
export interface MemSession {
  id: string;
  ownerId: string;
  title: string | null;
  scenario: string | null;
  turnBudget: number | null;
  turnsSpent: number;
  tokenBudget: number | null;
  tokensSpent: number;
  mannaBudget: number | null;
  mannaSpent: number;
  autoReply: boolean | null;
  replyInterval: number | null;
  actorSelection: ActorSelection | null;
  agentIds: string[];
  members: Map<string, Permission>;
  createdAt: Date;
  updatedAt: Date;
}
type MemMessage = Omit<MessageView, 'reactions' | 'toolCalls'> & { updatedAt: Date };
interface MemReaction {
  messageId: string;
  userId: string;
  reaction: string;
  createdAt: Date;
}
interface MemShare {
  id: string;
  sessionId: string;
  ownerId: string;
  messageId: string | null;
  title: string;
  createdAt: Date;
}

/** Everything the stores hold; tests arrange it directly and compare it before and after. */
export class World {
  /**
   * The clock the stores stamp rows with: the one the rules under test read, so that a test with
   * a fake clock never finds a row stamped by the real one (or the other way round).
   */
  constructor(readonly now: () => Date) {}

  users = new Map<string, MemUser>();
  agents = new Map<string, MemAgent>();
  sessions = new Map<string, MemSession>();
  messages: MemMessage[] = [];
  reactions: MemReaction[] = [];
  shares: MemShare[] = [];
  apiKeys = new Set<string>();
  signals = new Map<bigint, Signal>();
  private nextSignal = 1n;
  private nextOrdinal = 1;

  user(username: string, type: 'user' | 'agent' = 'user') {
    const user = { id: randomUUID(), username, type };
    this.users.set(user.id, user);
    return user;
  }

  agent(name: string, ownerId: string, isPublic = true) {
    const profile = this.user(name.toLowerCase(), 'agent');
    const agent = { id: profile.id, name, ownerId, public: isPublic };
    this.agents.set(agent.id, agent);
    return agent;
  }

  session(
    ownerId: string,
    agentIds: string[],
    settings: Partial<Pick<MemSession, 'turnBudget' | 'tokenBudget' | 'mannaBudget' | 'autoReply' | 'replyInterval' | 'actorSelection'>> & {
      title?: string;
    } = {},
  ) {
    const now = this.now();
    const session: MemSession = {
      id: randomUUID(),
      ownerId,
      title: settings.title ?? null,
      scenario: null,
      turnBudget: settings.turnBudget ?? null,
      turnsSpent: 0,
      tokenBudget: settings.tokenBudget ?? null,
      tokensSpent: 0,
      mannaBudget: settings.mannaBudget ?? null,
      mannaSpent: 0,
      autoReply: settings.autoReply ?? null,
      replyInterval: settings.replyInterval ?? null,
      actorSelection: settings.actorSelection ?? null,
      agentIds,
      members: new Map([[ownerId, 'owner']]),
      createdAt: now,
      updatedAt: now,
    };
    this.sessions.set(session.id, session);
    return session;
  }

  message(sessionId: string, m: Partial<MemMessage> & Pick<MemMessage, 'role'>): MemMessage {
    const message: MemMessage = {
      id: randomUUID(),
      sessionId,
      ordinal: this.nextOrdinal++,
      senderId: null,
      promptId: null,
      status: 'complete',
      content: '',
      attachments: [],
      thought: null,
      error: null,
      promptTokens: 0,
      completionTokens: 0,
      createdAt: this.now().toISOString(),
      updatedAt: this.now(),
      ...m,
    };
    this.messages.push(message);
    return message;
  }

  record(signal: Signal) {
    const id = this.nextSignal++;
    this.signals.set(id, signal);
    return id;
  }

  view(m: MemMessage): MessageView {
    const { updatedAt: _, ...rest } = m;
    const reactions = this.reactions.filter((r) => r.messageId === m.id);
    return { ...rest, toolCalls: [], reactions: reactionsView(reactions) };
  }

  /** Everything held, as plain data: equal snapshots mean nothing changed. */
  snapshot() {
    return structuredClone({
      sessions: [...this.sessions.values()],
      messages: this.messages,
      reactions: this.reactions,
      shares: this.shares,
      signals: [...this.signals],
    });
  }
}

/** The settings the rules change and these stores keep. */
const settingsIn = (s: SessionSettings | undefined) =>
  Object.fromEntries(
    Object.entries({
      title: s?.title,
      scenario: s?.scenario,
      turnBudget: s?.turnBudget,
      tokenBudget: s?.tokenBudget,
      mannaBudget: s?.mannaBudget,
      autoReply: s?.autoReply,
      replyInterval: s?.replyInterval,
      actorSelection: s?.actorSelection,
    }).filter(([, v]) => v !== undefined),
  );

const byActivity = (a: MemSession, b: MemSession) =>
  b.updatedAt.getTime() - a.updatedAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

function matches(s: MemSession, filter: SessionFilter) {
  if ('ownedBy' in filter) return s.ownerId === filter.ownedBy;
  if ('sharedWith' in filter) return s.ownerId !== filter.sharedWith && s.members.has(filter.sharedWith);
  return s.members.has(filter.memberOf) && (filter.agentId === undefined || s.agentIds.includes(filter.agentId));
}

/** The in-memory store answers every query with the session's own fields: the rules pass queries through untouched. */
const asRead = <Q extends SessionQuery>(s: MemSession) => {
  const { agentIds: _a, members: _m, ...fields } = s;
  return structuredClone(fields) as unknown as SessionRead<Q>;
};

function messageSlice(world: World, sessionId: string, w: MessageWindow) {
  const inWindow = world.messages
    .filter((m) => m.sessionId === sessionId && (w.after === null || m.ordinal > w.after) && (w.before === null || m.ordinal < w.before))
    .sort((a, b) => (w.forwards ? a.ordinal - b.ordinal : b.ordinal - a.ordinal))
    .slice(0, w.take + 1);
  const fits = rowsThatFit(
    inWindow.map((m) => Buffer.byteLength(m.content) + Buffer.byteLength(m.thought ?? '')),
    w.take,
    w.maxBytes,
  );
  const page = inWindow
    .slice(0, fits)
    .sort((a, b) => a.ordinal - b.ordinal)
    .map((m) => world.view(m));
  return { messages: page, more: inWindow.length > fits };
}

/** Who is where, which agents answer, and saving prompts. */
function promptStatements(
  world: World,
): Pick<
  SessionStore,
  'places' | 'sessionAgents' | 'agentsForNewSessions' | 'addPrompt' | 'createSession' | 'updateSettings' | 'settingsOf'
> {
  const keyGone = (keyId: string | null | undefined) => Boolean(keyId) && !world.apiKeys.has(keyId!);
  const write = (sessionId: string, userId: string, prompt: { content: string; attachments: string[]; responders: string[] }) => {
    const message = world.message(sessionId, { role: 'user', senderId: userId, content: prompt.content, attachments: prompt.attachments });
    const replies = prompt.responders.map((agentId) => {
      const reply = world.message(sessionId, { role: 'assistant', senderId: agentId, promptId: message.id, status: 'streaming' });
      return { messageId: reply.id, agentId, ordinal: reply.ordinal, createdAt: new Date(reply.createdAt) };
    });
    return { prompt: world.view(message), replies };
  };
  return {
    async places(asks) {
      const places = new Map<(typeof asks)[number], { permission: Permission | null }>();
      for (const ask of asks) {
        const session = world.sessions.get(ask.sessionId);
        if (session) places.set(ask, { permission: session.members.get(ask.userId) ?? null });
      }
      return places;
    },
    async sessionAgents(sessionId) {
      const agents = world.sessions.get(sessionId)?.agentIds.map((id) => world.agents.get(id)!) ?? [];
      return agents.map((a) => ({ ...a, key: world.users.get(a.id)!.username }));
    },
    async agentsForNewSessions(asks) {
      const found = new Map<(typeof asks)[number], NewSessionAgent>();
      for (const ask of asks) {
        const agent = world.agents.get(ask.agentId);
        // The reply engine, which reads the rest of an agent's row, is not under test here.
        const row = agent && ({ ...agent, user: { username: world.users.get(agent.id)!.username } } as unknown as NewSessionAgent['agent']);
        if (row) found.set(ask, { agent: row, memories: ask.recall ? [] : undefined });
      }
      return found;
    },
    async addPrompt(p) {
      const session = world.sessions.get(p.session.id)!;
      if (keyGone(p.keyId)) throw new KeyGone();
      const turns = p.prompt?.responders.length ?? 0;
      if (p.prompt && session.turnBudget !== null && session.turnsSpent + turns > session.turnBudget) throw new BudgetStop('turns');
      Object.assign(session, settingsIn(p.session.update), { updatedAt: world.now() });
      if (!p.prompt) return { sessionId: session.id, prompt: null, replies: [], firstExchange: false };
      const firstExchange = session.title === null && !world.messages.some((m) => m.sessionId === session.id && m.role === 'user');
      session.turnsSpent += turns;
      return { sessionId: session.id, ...write(session.id, p.userId, p.prompt), firstExchange };
    },
    async createSession(p): Promise<SavedNewSession> {
      if (keyGone(p.keyId)) throw new KeyGone();
      const { agents, ...settings } = p.session.create;
      const session = world.session(
        p.userId,
        agents.map((a) => a.id),
      );
      Object.assign(session, settingsIn(settings), { turnsSpent: p.prompt?.responders.length ?? 0 });
      world.message(session.id, { role: 'eden', content: `${agents.map((a) => a.name).join(', ')} joined the session` });
      if (!p.prompt) return { sessionId: session.id, prompt: null, replies: [], firstExchange: false, history: [] };
      return { sessionId: session.id, ...write(session.id, p.userId, p.prompt), firstExchange: settings.title === undefined, history: [] };
    },
    async updateSettings(sessionId, settings) {
      Object.assign(world.sessions.get(sessionId)!, settingsIn(settings), { updatedAt: world.now() });
    },
    async settingsOf(sessionId) {
      const s = world.sessions.get(sessionId);
      return s ? { title: s.title, scenario: s.scenario } : null;
    },
  };
}

/** Sessions and their messages, as readers page through them. */
function readStatements(
  world: World,
): Pick<SessionStore, 'session' | 'sessions' | 'numberedSessions' | 'userNamed' | 'message' | 'messages' | 'sessionWithMessages'> {
  const existing = (id: string) => {
    const session = world.sessions.get(id);
    if (!session) throw new Error(`no session ${id}`);
    return session;
  };
  return {
    session: async (id, _query) => asRead<typeof _query>(existing(id)),
    async sessions(filter, { from, limit }, _query) {
      const all = [...world.sessions.values()].filter((s) => matches(s, filter)).sort(byActivity);
      const after = from ? all.filter((s) => byActivity(s, { ...s, updatedAt: from.updatedAt, id: from.id }) > 0) : all;
      const page = after.slice(0, limit);
      return { sessions: page.map(asRead<typeof _query>), next: after.length > limit ? page.at(-1)! : null };
    },
    async numberedSessions(filter, window, _query) {
      const all = [...world.sessions.values()].filter((s) => matches(s, filter)).sort(byActivity);
      const cut = numberedCut(
        all.map((s) => Buffer.byteLength(JSON.stringify(s))),
        window.page,
        window.limit,
        window.maxBytes,
      );
      return { sessions: all.slice(cut.start, cut.end).map(asRead<typeof _query>), total: all.length, cut };
    },
    userNamed: async (username) => [...world.users.values()].find((u) => u.username === username) ?? null,
    async message(id) {
      const m = world.messages.find((x) => x.id === id);
      return m ? world.view(m) : null;
    },
    messages: async (sessionId, window) => messageSlice(world, sessionId, window),
    sessionWithMessages: async (id, _query, window) => ({
      session: asRead<typeof _query>(existing(id)),
      page: messageSlice(world, id, window),
    }),
  };
}

/** Reactions, cancelling, and the changes to who is in a session. */
function changeStatements(
  world: World,
): Pick<
  SessionStore,
  'sessionOfMessage' | 'toggleReaction' | 'reactionsOf' | 'promptsAnswering' | 'deleteSession' | 'ownerOf' | 'setMember' | 'removeMember'
> {
  return {
    sessionOfMessage: async (messageId) => world.messages.find((m) => m.id === messageId)?.sessionId ?? null,
    async toggleReaction({ messageId, userId, reaction, replaces, limit }) {
      const mine = (r: MemReaction) => r.messageId === messageId && r.userId === userId;
      const had = world.reactions.some((r) => mine(r) && r.reaction === reaction);
      if (had) world.reactions = world.reactions.filter((r) => !(mine(r) && r.reaction === reaction));
      else {
        const kept = world.reactions.filter((r) => !(mine(r) && r.reaction === replaces));
        if (kept.filter(mine).length >= limit) throw new ReactionLimitReached();
        world.reactions = [...kept, { messageId, userId, reaction, createdAt: world.now() }];
      }
      const reactions = world.reactions.filter((r) => r.messageId === messageId).map((r) => ({ userId: r.userId, reaction: r.reaction }));
      return { added: !had, reactions };
    },
    async reactionsOf(messageId, userId) {
      const sessionId = world.messages.find((m) => m.id === messageId)?.sessionId;
      if (!sessionId || !world.sessions.get(sessionId)?.members.has(userId)) return [];
      return world.reactions.filter((r) => r.messageId === messageId && r.userId === userId).map((r) => r.reaction);
    },
    async promptsAnswering(sessionId, promptId) {
      const answering = world.messages.filter(
        (m) =>
          m.sessionId === sessionId &&
          m.status === 'streaming' &&
          m.role === 'assistant' &&
          (promptId === undefined || m.promptId === promptId),
      );
      return new Set(answering.map((m) => m.promptId)).size;
    },
    async deleteSession(id, signal) {
      const gone = new Set(world.messages.filter((m) => m.sessionId === id).map((m) => m.id));
      world.sessions.delete(id);
      world.messages = world.messages.filter((m) => m.sessionId !== id);
      world.reactions = world.reactions.filter((r) => !gone.has(r.messageId));
      world.shares = world.shares.filter((s) => s.sessionId !== id);
      return world.record(signal);
    },
    async ownerOf(sessionId) {
      const session = world.sessions.get(sessionId);
      if (!session) throw new Error(`no session ${sessionId}`);
      return session.ownerId;
    },
    async setMember(sessionId, userId, permission) {
      world.sessions.get(sessionId)!.members.set(userId, permission);
    },
    async removeMember(sessionId, userId, signal) {
      const session = world.sessions.get(sessionId);
      if (!session?.members.delete(userId)) return null;
      return world.record(signal);
    },
  };
}

export const inMemorySessionStore = (world: World): SessionStore => ({
  ...promptStatements(world),
  ...readStatements(world),
  ...changeStatements(world),
});

export const inMemoryWatchAccessStore = (world: World): WatchAccessStore => ({
  existingKeys: async (ids) => new Set(ids.filter((id) => world.apiKeys.has(id))),
  async members(sessionIds, userIds) {
    const members = new Map<string, Set<string>>();
    for (const id of sessionIds) {
      const session = world.sessions.get(id);
      if (session) members.set(id, new Set([session.ownerId, ...userIds.filter((u) => session.members.has(u))]));
    }
    return members;
  },
});

export const inMemorySignalStore = (world: World): SignalStore => ({
  pending: async (limit) => [...world.signals].slice(0, limit).map(([id, signal]) => ({ id, signal })),
  async remove(id) {
    world.signals.delete(id);
  },
});

export const inMemoryShareStore = (world: World): ShareStore => ({
  async share(id) {
    const share = world.shares.find((s) => s.id === id);
    if (!share) return null;
    const session = world.sessions.get(share.sessionId)!;
    const owner = world.users.get(share.ownerId)!;
    return {
      id: share.id,
      title: share.title,
      public: true,
      createdAt: share.createdAt,
      owner: { username: owner.username, userImage: null },
      upTo: world.messages.find((m) => m.id === share.messageId)?.ordinal ?? null,
      session: {
        id: session.id,
        title: session.title,
        createdAt: session.createdAt,
        agents: session.agentIds.map((a) => ({ key: world.users.get(a)!.username, name: world.agents.get(a)!.name, image: null })),
      },
    };
  },
  async messagesAsOf(sessionId, upTo, asOf) {
    const kept = world.messages.filter(
      (m) => m.sessionId === sessionId && m.ordinal <= upTo && m.status !== 'streaming' && m.updatedAt <= asOf,
    );
    return kept.map((m) => {
      const sender = m.senderId ? world.users.get(m.senderId) : undefined;
      return {
        id: m.id,
        role: m.role,
        content: m.content,
        attachments: m.attachments,
        createdAt: new Date(m.createdAt),
        sender: sender ? { username: sender.username, userImage: null, type: sender.type } : null,
        reactions: world.reactions
          .filter((r) => r.messageId === m.id && r.createdAt <= asOf)
          .map(({ userId, reaction }) => ({ userId, reaction })),
      };
    });
  },
  sessionTitle: async (sessionId) => world.sessions.get(sessionId)!.title,
  async finishedMessage(sessionId, messageId) {
    const finished = world.messages.filter((m) => m.sessionId === sessionId && m.status !== 'streaming');
    return (messageId === undefined ? finished.at(-1) : finished.find((m) => m.id === messageId))?.id ?? null;
  },
  async create(share) {
    const id = randomUUID();
    world.shares.push({ id, ...share, createdAt: world.now() });
    return id;
  },
  ownerOf: async (shareId) => world.shares.find((s) => s.id === shareId)?.ownerId ?? null,
  async delete(shareId) {
    world.shares = world.shares.filter((s) => s.id !== shareId);
  },
});

/** The autonomy rules' statements over the world: a turn is spent and its reply saved at once, as in one transaction. */
export const inMemoryAutonomyStore = (world: World): AutonomyStore => ({
  async state(sessionId) {
    const s = world.sessions.get(sessionId);
    if (!s || s.autoReply === null || s.replyInterval === null || s.actorSelection === null) return null;
    const messages = world.messages.filter((m) => m.sessionId === sessionId);
    const finished = messages.filter((m) => (m.role === 'user' || m.role === 'assistant') && m.status !== 'streaming');
    return {
      autoReply: s.autoReply,
      replyInterval: s.replyInterval,
      actorSelection: s.actorSelection,
      ownerId: s.ownerId,
      agents: s.agentIds.map((id) => {
        const a = world.agents.get(id)!;
        return { id, name: a.name, key: world.users.get(id)!.username, public: a.public, ownerId: a.ownerId };
      }),
      lastSpeakerId: messages.filter((m) => m.role === 'assistant').at(-1)?.senderId ?? null,
      lastActivityAt: finished.length ? new Date(Math.max(...finished.map((m) => m.updatedAt.getTime()))) : null,
      replying: messages.some((m) => m.status === 'streaming'),
      budget: { turns: s.turnBudget, tokens: s.tokenBudget, manna: s.mannaBudget },
      spent: { turns: s.turnsSpent, tokens: s.tokensSpent, manna: s.mannaSpent },
    };
  },
  async standing(sessionId) {
    const s = world.sessions.get(sessionId);
    if (!s) return null;
    return { autoReply: s.autoReply === true, budgeted: s.turnBudget !== null || s.tokenBudget !== null || s.mannaBudget !== null };
  },
  async startTurn(sessionId, agentId) {
    const s = world.sessions.get(sessionId)!;
    if (s.tokenBudget !== null && s.tokensSpent >= s.tokenBudget) return { stopped: 'tokens' };
    if (s.mannaBudget !== null && s.mannaSpent >= s.mannaBudget) return { stopped: 'manna' };
    if (s.turnBudget !== null && s.turnsSpent + 1 > s.turnBudget) return { stopped: 'turns' };
    if (world.messages.some((m) => m.sessionId === sessionId && m.status === 'streaming')) return { busy: true };
    s.turnsSpent += 1;
    const id = randomUUID();
    const reply = world.message(sessionId, { id, role: 'assistant', senderId: agentId, promptId: id, status: 'streaming' });
    return { started: { messageId: reply.id, agentId, ordinal: reply.ordinal, createdAt: new Date(reply.createdAt) } };
  },
  async turnOff(sessionId) {
    const s = world.sessions.get(sessionId);
    if (!s?.autoReply) return false;
    s.autoReply = false;
    return true;
  },
  async replyOutcome(messageId) {
    const m = world.messages.find((x) => x.id === messageId);
    return m ? { status: m.status, error: m.error } : null;
  },
});
