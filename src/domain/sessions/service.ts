import type { Db } from '../../db/database.ts';
import type { WorkConfig } from '../../config.ts';
import { Prisma, type Session } from '../../generated/prisma/client.ts';
import type { EventBus } from '../core/bus.ts';
import { canReadAgent } from '../agents/service.ts';
import { recalledFacts } from '../memory/service.ts';
import { memoriesOf } from '../memory/store.ts';
import { coalesced } from '../core/coalesce.ts';
import { badInput, forbidden, notFound, unauthenticated, unprocessable } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import type { ReplyEngine, ReplyJob } from '../replies/engine.ts';
import { chooseResponders } from '../replies/routing.ts';
import { parseInput } from '../core/validation.ts';
import { releaseHolds } from '../core/stores/holds.ts';
import type { Viewer } from '../core/viewer.ts';
import type { StreamLimits } from '../core/stream-limits.ts';
import type { AccessGate } from './access-gate.ts';
import type { SignalOutbox } from './signals.ts';
import { canManage, canPost, NO_ACCESS, SESSION_NOT_FOUND, type Permission } from './access.ts';
import { decodeCursor, encodeCursor, parseOrdinal } from '../core/cursors.ts';
import type { MessageView, ReactionsView } from '../core/events.ts';
import { pageSchema } from '../core/cursors.ts';
import { numberedPageSchema, reactionSchema, sendMessageSchema, sessionUserSchema, type SendMessageInput } from './inputs.ts';
import { sessionWatchStep } from './stream.ts';
import { KEY_DELETED_END, watchStream, type WatchStream } from '../core/watch.ts';
import { KeyGone, newSessionWriter, savePrompt } from './prompts.ts';
import { EXCLUSIVE } from './reactions.ts';
import { messageSelect, reactionCounts, reactionsView, toMessageView } from '../core/views.ts';

export const MESSAGE_NOT_FOUND = 'Message not found';
export const NOT_ALLOWED_TO_DELETE = 'You are not allowed to delete this session';
export const AGENT_IDS_REQUIRED = 'agent_ids must be provided when creating a new session';
export const AGENT_NO_LONGER_USABLE = 'This agent is no longer usable by you (its owner made it private)';
export const NO_USABLE_AGENT = "This session's agents are no longer usable by you (their owners made them private)";

export type SessionQuery = { include?: Prisma.SessionInclude; select?: Prisma.SessionSelect };

/** The result of operation 4: the session, and the prompt whose replies are now being written. */
export interface PromptStarted {
  sessionId: string;
  created: boolean;
  /** Null when the request carried no message (a session created empty). */
  promptId: string | null;
  message: MessageView | null;
  replies: ReplyJob['replies'];
  /** Seq of the prompt's `start_prompt` event: watch from just before it to see the whole reply. */
  startSeq: number | null;
}

export interface MessagePageArgs {
  first?: number | null;
  after?: string | null;
  last?: number | null;
  before?: string | null;
}

export interface MessagePage {
  messages: MessageView[];
  hasNextPage: boolean;
  hasPreviousPage: boolean;
  cursor(m: MessageView): string;
}

export const DEFAULT_MESSAGE_PAGE = 50;
export const MAX_MESSAGE_PAGE = 200;
const messageCursor = (m: Pick<MessageView, 'ordinal'>) => encodeCursor('msg', String(m.ordinal));
const ordinalOf = (cursor: string) => decodeCursor('msg', cursor, parseOrdinal);

const sessionCursor = (s: Pick<Session, 'updatedAt' | 'id'>) => encodeCursor('ses', `${s.updatedAt.toISOString()}|${s.id}`);
const sessionPosition = (cursor: string) =>
  decodeCursor('ses', cursor, (v) => {
    const [at, id] = v.split('|');
    const date = new Date(at ?? '');
    return id && !Number.isNaN(date.getTime()) ? { updatedAt: date, id } : null;
  });
/** Newest activity first; the id breaks ties. */
const byActivity = [{ updatedAt: 'desc' as const }, { id: 'desc' as const }];

type LoadedAgentRow = Prisma.AgentGetPayload<{ include: { user: { select: { username: true } } } }>;
/** An agent named by a new session's prompt, with the user's memories when `recall`. */
interface AgentRead {
  agentId: string;
  userId: string;
  recall: boolean;
}
/** Each of a statement's users may bring MEMORY_CAP facts per agent: fewer reads per statement than for keys. */
const AGENT_READS_PER_STATEMENT = 100;

export function sessionService(
  db: Db,
  bus: EventBus,
  replies: ReplyEngine,
  work: WorkConfig,
  limits: StreamLimits,
  access: { gate: AccessGate; signals: SignalOutbox },
) {
  const { gate, signals } = access;
  /**
   * Callers' places in sessions, read for the requests that arrive together in one statement:
   * a thousand clients opening their watches at once cost a few reads instead of a thousand.
   */
  const places = coalesced(async (asks: readonly { sessionId: string; userId: string }[]) => {
    const rows = await db.$queryRaw<{ session_id: string; user_id: string; owner_id: string; permission: Permission | null }[]>`
      SELECT v.session_id, v.user_id, s."ownerId" AS owner_id, su."permission"::text AS permission
      FROM unnest(${asks.map((a) => a.sessionId)}::text[], ${asks.map((a) => a.userId)}::text[]) AS v(session_id, user_id)
      JOIN "Session" AS s ON s."id" = v.session_id
      LEFT JOIN "SessionUser" AS su ON su."sessionId" = v.session_id AND su."userId" = v.user_id`;
    const found = new Map(rows.map((r) => [`${r.session_id} ${r.user_id}`, r.owner_id === r.user_id ? 'owner' : r.permission]));
    const answers = new Map<(typeof asks)[number], { permission: Permission | null }>();
    for (const a of asks) {
      const permission = found.get(`${a.sessionId} ${a.userId}`);
      if (permission !== undefined) answers.set(a, { permission });
    }
    return answers;
  });

  /** The caller's permission in a session, or NOT_FOUND when there is no such session. */
  async function permissionIn(viewer: Viewer, sessionId: string): Promise<Permission | null> {
    const place = canNameARow(sessionId) ? await places.load({ sessionId, userId: viewer.id }) : null;
    if (!place) throw notFound(SESSION_NOT_FOUND);
    return place.permission;
  }

  async function requireAccess(viewer: Viewer, sessionId: string): Promise<Permission> {
    const permission = await permissionIn(viewer, sessionId);
    if (!permission) throw forbidden(NO_ACCESS);
    return permission;
  }

  async function requireManager(viewer: Viewer, sessionId: string, action: string) {
    const permission = await requireAccess(viewer, sessionId);
    if (!canManage(permission)) throw forbidden(`Only an owner of this session can ${action}`);
  }

  /**
   * The agents a new session's prompt names, with what each remembers of the user when the
   * prompt will be answered: the reads of prompts that arrive together go in one statement.
   */
  const agentReads = coalesced(async (keys: readonly AgentRead[]) => {
    const users = [...new Set(keys.filter((k) => k.recall).map((k) => k.userId))];
    const rows = await db.agent.findMany({
      where: { id: { in: [...new Set(keys.map((k) => k.agentId))].filter(canNameARow) } },
      include: { user: { select: { username: true } }, ...(users.length ? { memories: memoriesOf(users) } : {}) },
    });
    const byId = new Map(rows.map((r) => [r.id, r as typeof r & { memories?: { fact: string; userId: string }[] }]));
    const reads = new Map<AgentRead, { agent: LoadedAgentRow; memories?: string[] }>();
    for (const key of keys) {
      const row = byId.get(key.agentId);
      if (!row) continue;
      const { memories, ...agent } = row;
      reads.set(key, { agent, memories: key.recall && memories ? recalledFacts(memories, key.userId) : undefined });
    }
    return reads;
  }, AGENT_READS_PER_STATEMENT);

  const saveInNewSession = newSessionWriter(db);

  /** The session's agents in order, as the prompt needs them; for a new session, checked first. */
  async function agentsFor(
    viewer: Viewer,
    input: SendMessageInput,
  ): Promise<
    {
      id: string;
      name: string;
      key: string;
      row?: LoadedAgentRow;
      /** What the agent remembers of the viewer, read with it for a new session's prompt. */
      memories?: string[];
    }[]
  > {
    if (input.sessionId) {
      const rows = await db.sessionAgent.findMany({
        where: { sessionId: input.sessionId },
        orderBy: { position: 'asc' },
        select: { agent: { select: { id: true, name: true, public: true, ownerId: true, user: { select: { username: true } } } } },
      });
      input.agentIds?.forEach((id, i) => {
        const row = rows.find((r) => r.agent.id === id);
        if (!row) throw badInput('agent is not in this session', ['agentIds', i]);
        if (!canReadAgent(viewer, row.agent)) throw forbidden(AGENT_NO_LONGER_USABLE);
      });
      // Checked on every prompt, not only when the session was made: an agent its owner made
      // private since must not answer (or charge its owner for) someone who may no longer use it.
      return rows
        .filter((r) => canReadAgent(viewer, r.agent))
        .map((r) => ({ id: r.agent.id, name: r.agent.name, key: r.agent.user.username }));
    }
    if (!input.agentIds?.length) throw badInput(AGENT_IDS_REQUIRED);
    const recall = !input.extras?.excludeMemory && Boolean(input.content?.trim() || input.attachments?.length);
    const found = await agentReads.loadMany(input.agentIds.map((agentId) => ({ agentId, userId: viewer.id, recall })));
    return found.map((read, i) => {
      if (read instanceof Error) throw read;
      if (!read || !canReadAgent(viewer, read.agent)) throw badInput('agent not found or not usable by you', ['agentIds', i]);
      const { agent, memories } = read;
      return { id: agent.id, name: agent.name, key: agent.user.username, row: agent, memories };
    });
  }

  async function list<Q extends SessionQuery>(
    where: Prisma.SessionWhereInput,
    page: { first?: unknown; after?: unknown } | undefined,
    query: Q,
  ) {
    const { first: limit, after } = parseInput(pageSchema, Object.fromEntries(Object.entries(page ?? {}).filter(([, v]) => v != null)));
    const from = after ? sessionPosition(after) : null;
    const rows = await db.session.findMany({
      where: from
        ? { AND: [where, { OR: [{ updatedAt: { lt: from.updatedAt } }, { updatedAt: from.updatedAt, id: { lt: from.id } }] }] }
        : where,
      orderBy: byActivity,
      take: limit + 1,
      ...query,
    });
    const sessions = rows.slice(0, limit);
    return {
      sessions: sessions as unknown as Prisma.SessionGetPayload<Q>[],
      nextCursor: rows.length > limit ? sessionCursor(sessions.at(-1)!) : null,
      cursor: sessionCursor,
    };
  }

  const sessionSettings = (input: SendMessageInput) => ({
    title: input.title,
    scenario: input.scenario,
    mannaBudget: input.budget?.mannaBudget,
    tokenBudget: input.budget?.tokenBudget,
    turnBudget: input.budget?.turnBudget,
  });

  /**
   * Operation 4. Saves the prompt and starts the agents' replies in the background. The turn
   * budget is spent for every agent that will answer in the same transaction that saves the
   * prompt, so concurrent prompts can never run more model calls than the budget allows; a
   * prompt past a budget saves nothing.
   */
  async function send(viewer: Viewer, raw: unknown, options: { confirmKey?: boolean } = {}): Promise<PromptStarted> {
    const input = parseInput(sendMessageSchema, raw);
    const settings = sessionSettings(input);
    const changesSettings = Object.values(settings).some((v) => v !== undefined);
    if (input.sessionId) {
      const permission = await permissionIn(viewer, input.sessionId);
      if (!canPost(permission)) throw forbidden(NO_ACCESS);
      if (changesSettings && !canManage(permission))
        throw forbidden('Only an owner of this session can change its title, scenario or budget');
    }
    const agents = await agentsFor(viewer, input);
    const content = input.content ?? '';
    const attachments = input.attachments ?? [];
    const hasPrompt = content.trim() !== '' || attachments.length > 0;
    if (hasPrompt && !agents.length) throw forbidden(NO_USABLE_AGENT);
    const responders = hasPrompt ? chooseResponders(agents, input.agentIds, content) : [];

    const toSave = {
      userId: viewer.id,
      prompt: hasPrompt ? { content, attachments, responders } : null,
      instance: replies.instanceId,
      keyId: options.confirmKey ? viewer.keyId : null,
    };
    // A new session is one statement; a prompt to an existing one reserves its turns first.
    let saved: Awaited<ReturnType<typeof savePrompt>>;
    let known: ReplyJob['known'];
    try {
      if (input.sessionId) {
        const update = changesSettings ? settings : undefined;
        saved = await db.$transaction((tx) => savePrompt(tx, { ...toSave, session: { id: input.sessionId!, update } }));
      } else {
        const created = await saveInNewSession({ ...toSave, session: { create: { ...settings, agents } } });
        saved = created;
        // A new session's replies need nothing more from the database than what was just written.
        known = {
          scenario: input.scenario ?? null,
          agents: agents.flatMap((a) => (a.row ? [a.row] : [])),
          history: created.history,
          memories: new Map(agents.flatMap((a) => (a.memories ? [[a.id, a.memories] as const] : []))),
        };
      }
    } catch (e) {
      if (e instanceof KeyGone) throw unauthenticated(KEY_DELETED_END.reason);
      throw e;
    }

    const { sessionId, prompt } = saved;
    if (input.sessionId && changesSettings) {
      const s = await db.session.findUnique({ where: { id: sessionId }, select: { title: true, scenario: true } });
      if (s) await bus.publish(sessionId, { type: 'session_updated', title: s.title, scenario: s.scenario });
    }
    if (!prompt) return { sessionId, created: !input.sessionId, promptId: null, message: null, replies: [], startSeq: null };
    const message = toMessageView({ ...prompt, toolCalls: [], reactions: [] });
    const started = await bus.publish(sessionId, {
      type: 'start_prompt',
      promptId: prompt.id,
      message,
      agentIds: responders,
      replyIds: saved.replies.map((r) => r.messageId),
    });
    replies.start({
      sessionId,
      promptId: prompt.id,
      userId: viewer.id,
      replies: saved.replies,
      thinking: input.thinking ?? false,
      excludeMemory: input.extras?.excludeMemory ?? false,
      generateTitle: saved.firstExchange,
      known,
    });
    return { sessionId, created: !input.sessionId, promptId: prompt.id, message, replies: saved.replies, startSeq: started.seq };
  }

  /**
   * Live events of a session for someone with access: replayed from after `after` when given,
   * then live. It ends with a reason when the session is deleted or the watcher removed.
   * With `promptId`, only that prompt's events, ending with its `end_prompt`. It holds one of
   * the subscriptions the caller's key may have open until it ends.
   */
  async function watch(viewer: Viewer, sessionId: string, options: { after?: number; promptId?: string } = {}): Promise<WatchStream> {
    if (!canNameARow(sessionId)) throw notFound(SESSION_NOT_FOUND);
    // Where the watch starts is fixed before access is checked: a removal that commits after the
    // check is published after this point, so the watch sees it; one before fails the check.
    const after = options.after ?? (await bus.position(sessionId));
    await requireAccess(viewer, sessionId);
    return openWatch(viewer, sessionId, { ...options, after }, await limits.hold(viewer, 'subscription'));
  }

  /**
   * A watch for someone whose access was checked just now; `release` gives its slots back when it
   * ends. `keyConfirmed`: the caller's key was seen to exist after a listener for its deletion was
   * already in place (see `sendAndWatch`), so it need not be looked up again.
   */
  function openWatch(
    viewer: Viewer,
    sessionId: string,
    options: { after?: number; promptId?: string; keyConfirmed?: boolean },
    release: () => void,
  ): WatchStream {
    let stopListening = () => {};
    const ticket = gate.open(viewer, sessionId, (end) => stream.interrupt(end));
    const stream = watchStream(
      bus.subscribe(sessionId, { after: options.after }),
      sessionWatchStep(viewer.id, options.promptId ?? null),
      () => {
        stopListening();
        ticket.close();
        release();
      },
      ticket.admit,
    );
    // A deleted API key ends what was opened with it, on every transport. The key was checked
    // when the request began; one deleted since, before this listener, is caught by looking again.
    stopListening = bus.onKeyRevoked((keyId) => {
      if (keyId === viewer.keyId) stream.interrupt(KEY_DELETED_END);
    });
    if (!options.keyConfirmed) ticket.confirmKey();
    return stream;
  }

  /**
   * A page of the session's messages, oldest first within the page. `first`/`after` page
   * forwards, `last`/`before` backwards; with neither, the latest messages.
   */
  async function messagePage(client: Pick<Db, 'message' | '$queryRaw'>, sessionId: string, args: MessagePageArgs): Promise<MessagePage> {
    const size = (n: number | null | undefined) => {
      if (n == null) return DEFAULT_MESSAGE_PAGE;
      if (!Number.isInteger(n) || n < 0 || n > MAX_MESSAGE_PAGE)
        throw badInput(`must be a whole number from 0 to ${MAX_MESSAGE_PAGE}`, [args.first != null ? 'first' : 'last']);
      return n;
    };
    const after = args.after ? ordinalOf(args.after) : null;
    const before = args.before ? ordinalOf(args.before) : null;
    const forwards = args.first != null || (after !== null && args.last == null);
    const take = size(forwards ? args.first : args.last);
    // Sizes first, so a page of huge messages is cut short before their text is read at all.
    const sizes = await client.$queryRaw<{ ordinal: number; bytes: number }[]>`
      SELECT "ordinal", octet_length("content") + coalesce(octet_length("thought"), 0) AS "bytes" FROM "Message"
      WHERE "sessionId" = ${sessionId}
        ${after !== null ? Prisma.sql`AND "ordinal" > ${after}` : Prisma.empty}
        ${before !== null ? Prisma.sql`AND "ordinal" < ${before}` : Prisma.empty}
      ORDER BY "ordinal" ${forwards ? Prisma.sql`ASC` : Prisma.sql`DESC`} LIMIT ${take + 1}`;
    let fits = 0;
    for (let bytes = 0; fits < Math.min(take, sizes.length); fits++) {
      bytes += Number(sizes[fits]!.bytes);
      if (fits > 0 && bytes > work.messagePageMaxBytes) break;
    }
    const more = sizes.length > fits;
    const ordinals = sizes.slice(0, fits).map((s) => Number(s.ordinal));
    const rows = ordinals.length
      ? await client.message.findMany({
          where: { sessionId, ordinal: { in: ordinals } },
          orderBy: { ordinal: 'asc' },
          select: messageSelect,
        })
      : [];
    // Oldest first within the page, whichever way it was read.
    const page = rows.map(toMessageView);
    return {
      messages: page,
      hasNextPage: forwards ? more : before !== null,
      hasPreviousPage: forwards ? after !== null : more,
      cursor: messageCursor,
    };
  }

  return {
    permissionIn,

    async get<Q extends SessionQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<Prisma.SessionGetPayload<Q>> {
      await requireAccess(viewer, id);
      return (await db.session.findUniqueOrThrow({ where: { id }, ...query })) as unknown as Prisma.SessionGetPayload<Q>;
    },

    /** Sessions the caller owns, newest activity first. */
    async listMine<Q extends SessionQuery = object>(viewer: Viewer, page: { first?: unknown; after?: unknown }, query: Q = {} as Q) {
      return list({ ownerId: viewer.id }, page, query);
    },

    /**
     * Sessions the caller owns or was added to, newest activity first, a numbered page at a time
     * with the total (the original's `GET /v2/sessions`); `agentKey` keeps those with that agent.
     */
    async pageOf<Q extends SessionQuery = object>(viewer: Viewer, raw: unknown, query: Q = {} as Q) {
      const { page, limit, agentKey } = parseInput(numberedPageSchema, raw);
      let agentFilter: Prisma.SessionWhereInput = {};
      if (agentKey !== undefined) {
        const agent = await db.user.findUnique({ where: { username: agentKey }, select: { id: true, type: true } });
        if (!agent || agent.type !== 'agent') throw notFound('Agent not found');
        agentFilter = { agents: { some: { agentId: agent.id } } };
      }
      const where: Prisma.SessionWhereInput = { OR: [{ ownerId: viewer.id }, { users: { some: { userId: viewer.id } } }], ...agentFilter };
      const [total, rows] = await db.$transaction([
        db.session.count({ where }),
        db.session.findMany({ where, orderBy: byActivity, skip: (page - 1) * limit, take: limit, ...query }),
      ]);
      return { sessions: rows as unknown as Prisma.SessionGetPayload<Q>[], total, page, limit };
    },

    /** Sessions other users added the caller to, newest activity first (operation 1). */
    async listShared<Q extends SessionQuery = object>(viewer: Viewer, page: { first?: unknown; after?: unknown }, query: Q = {} as Q) {
      return list({ ownerId: { not: viewer.id }, users: { some: { userId: viewer.id } } }, page, query);
    },

    /** One message, for whoever may read its session; an unknown id and a session out of reach answer alike. */
    async message(viewer: Viewer, id: string): Promise<MessageView> {
      const row = canNameARow(id) ? await db.message.findUnique({ where: { id }, select: messageSelect }) : null;
      if (!row || !(await permissionIn(viewer, row.sessionId))) throw notFound('Message not found or you do not have access to it');
      return toMessageView(row);
    },

    async messages(viewer: Viewer, sessionId: string, args: MessagePageArgs): Promise<MessagePage> {
      await requireAccess(viewer, sessionId);
      return messagePage(db, sessionId, args);
    },

    /**
     * The session and a page of its messages as of one moment: a reply that ends between the two
     * reads would otherwise show as complete while the session's counters still lack its tokens.
     */
    async withMessages<Q extends SessionQuery = object>(
      viewer: Viewer,
      id: string,
      query: Q,
      args: MessagePageArgs,
    ): Promise<{ session: Prisma.SessionGetPayload<Q>; page: MessagePage }> {
      await requireAccess(viewer, id);
      return db.$transaction(
        async (tx) => {
          const session = (await tx.session.findUniqueOrThrow({ where: { id }, ...query })) as unknown as Prisma.SessionGetPayload<Q>;
          return { session, page: await messagePage(tx, id, args) };
        },
        { isolationLevel: 'RepeatableRead' },
      );
    },

    send,
    watch,

    /**
     * Sends a prompt and watches its replies: what `stream: true` and `Subscription.sendMessage`
     * do. The caller's stream slot is taken first, so a stream refused saves no prompt.
     */
    async sendAndWatch(viewer: Viewer, raw: unknown) {
      const release = await limits.hold(viewer, 'stream');
      // The key's deletion is listened for before the prompt is saved, and the save checks that
      // the key still exists: a deletion either stops the save or is heard here, with no lookup
      // of the key after the save.
      let keyDeleted = false;
      const stopListening = viewer.keyId
        ? bus.onKeyRevoked((keyId) => {
            if (keyId === viewer.keyId) keyDeleted = true;
          })
        : () => {};
      let started;
      try {
        started = await send(viewer, raw, { confirmKey: true });
      } catch (e) {
        stopListening();
        release();
        throw e;
      }
      if (!started.promptId) {
        stopListening();
        release();
        return { started, events: null };
      }
      // The prompt was just accepted from this caller, so their access was checked.
      const { sessionId, startSeq, promptId } = started;
      const events = openWatch(viewer, sessionId, { after: startSeq! - 1, promptId, keyConfirmed: true }, release);
      stopListening();
      if (keyDeleted) events.interrupt(KEY_DELETED_END);
      return { started, events };
    },

    /**
     * Operation 6: toggles the caller's reaction on a message; `thumbs_up` and `thumbs_down`
     * replace each other.
     */
    async react(viewer: Viewer, raw: unknown): Promise<{ added: boolean; messageId: string; reactions: ReactionsView }> {
      const { messageId, reaction } = parseInput(reactionSchema, raw);
      const message = canNameARow(messageId)
        ? await db.message.findUnique({ where: { id: messageId }, select: { sessionId: true } })
        : null;
      if (!message) throw notFound(MESSAGE_NOT_FOUND);
      await requireAccess(viewer, message.sessionId);
      const { added, rows } = await db.$transaction(async (tx) => {
        // One user's reactions to one message queue here, so concurrent ones cannot pass the cap.
        await tx.$queryRaw`SELECT 1 FROM "Message" WHERE "id" = ${messageId} FOR UPDATE`;
        const mine = { messageId, userId: viewer.id };
        const { count: removed } = await tx.reaction.deleteMany({ where: { ...mine, reaction } });
        if (!removed) {
          const opposite = EXCLUSIVE.get(reaction);
          if (opposite) await tx.reaction.deleteMany({ where: { ...mine, reaction: opposite } });
          if ((await tx.reaction.count({ where: mine })) >= work.reactionsPerUserMessage)
            throw unprocessable(`Reaction limit reached: at most ${work.reactionsPerUserMessage} reactions per user on one message`);
          await tx.reaction.createMany({ data: [{ ...mine, reaction }], skipDuplicates: true });
        }
        const rows = await tx.reaction.findMany({
          where: { messageId },
          select: { userId: true, reaction: true },
          orderBy: { createdAt: 'asc' },
        });
        return { added: !removed, rows };
      });
      const reactions = reactionsView(rows);
      await bus.publish(message.sessionId, {
        type: 'reaction',
        messageId,
        userId: viewer.id,
        userReactions: reactions[viewer.id] ?? [],
        counts: reactionCounts(reactions),
      });
      return { added, messageId, reactions };
    },

    /**
     * The caller's own reactions on a message (what a reaction event about someone else does not
     * say); empty for a message they cannot see.
     */
    async myReactions(viewer: Viewer, messageId: string): Promise<string[]> {
      if (!canNameARow(messageId)) return [];
      const rows = await db.reaction.findMany({
        where: {
          messageId,
          userId: viewer.id,
          message: { session: { OR: [{ ownerId: viewer.id }, { users: { some: { userId: viewer.id } } }] } },
        },
        select: { reaction: true },
      });
      return rows.map((r) => r.reaction);
    },

    /** Stops the replies being written in a session (to one prompt, or all); anyone who may post may. */
    async cancel(viewer: Viewer, sessionId: string, promptId?: string) {
      if (!canPost(await requireAccess(viewer, sessionId))) throw forbidden(NO_ACCESS);
      if (promptId !== undefined && !canNameARow(promptId)) return 0;
      // Counted from the rows, because the replies may be written by another instance.
      const prompts = await db.message.findMany({
        where: { sessionId, status: 'streaming', role: 'assistant', ...(promptId !== undefined ? { promptId } : {}) },
        distinct: ['promptId'],
        select: { promptId: true },
      });
      await bus.cancelReplies({ sessionId, promptId, reason: 'cancelled' });
      return prompts.length;
    },

    /** Operation 9: owners only; messages, shares and reactions go with it, and watchers are told. */
    async delete(viewer: Viewer, id: string) {
      const permission = await permissionIn(viewer, id);
      if (!canManage(permission)) throw forbidden(NOT_ALLOWED_TO_DELETE);
      await bus.cancelReplies({ sessionId: id, reason: 'deleted' });
      const signal = { kind: 'event', sessionId: id, event: { type: 'session_deleted' } } as const;
      const signalId = await db.$transaction(async (tx) => {
        // Locked first: a tool call being charged now either commits before (and is refunded
        // here) or finds the session gone (and charges nothing).
        await tx.$queryRaw`SELECT 1 FROM "Session" WHERE "id" = ${id} FOR UPDATE`;
        await releaseHolds(tx, { message: { sessionId: id } }, 'The session was deleted');
        await tx.session.deleteMany({ where: { id } });
        return signals.record(tx, signal);
      });
      await signals.deliver(signalId, signal);
    },

    /** Adds a user to the session, or changes their permission. */
    async addUser(viewer: Viewer, sessionId: string, raw: unknown) {
      await requireManager(viewer, sessionId, 'add or remove users');
      const { username, permission } = parseInput(sessionUserSchema, raw);
      const user = await db.user.findUnique({ where: { username }, select: { id: true, type: true } });
      if (!user || user.type !== 'user') throw notFound('User not found');
      const session = await db.session.findUniqueOrThrow({ where: { id: sessionId }, select: { ownerId: true } });
      if (user.id === session.ownerId) throw badInput("The session's owner always keeps the owner permission");
      await db.sessionUser.upsert({
        where: { sessionId_userId: { sessionId, userId: user.id } },
        create: { sessionId, userId: user.id, permission },
        update: { permission },
      });
      await bus.publish(sessionId, { type: 'user_added', userId: user.id, permission });
      return { userId: user.id, permission };
    },

    /** Removes a user (owners may remove anyone but the owner; anyone may leave). */
    async removeUser(viewer: Viewer, sessionId: string, userId: string) {
      if (userId !== viewer.id) await requireManager(viewer, sessionId, 'add or remove users');
      else await requireAccess(viewer, sessionId);
      const session = await db.session.findUniqueOrThrow({ where: { id: sessionId }, select: { ownerId: true } });
      if (userId === session.ownerId) throw badInput("The session's owner cannot be removed");
      if (!canNameARow(userId)) throw notFound('That user is not in this session');
      const signal = { kind: 'event', sessionId, event: { type: 'user_removed', userId } } as const;
      const signalId = await db.$transaction(async (tx) => {
        const { count } = await tx.sessionUser.deleteMany({ where: { sessionId, userId } });
        return count ? signals.record(tx, signal) : null;
      });
      if (signalId === null) throw notFound('That user is not in this session');
      await signals.deliver(signalId, signal);
    },
  };
}

export type SessionService = ReturnType<typeof sessionService>;
