import { badInput, notFound } from '../core/errors.ts';
import type { MessageView } from '../core/events.ts';
import { canNameARow } from '../core/ids.ts';
import { decodeCursor, encodeCursor, pageSchema, parseOrdinal } from '../core/cursors.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import type { SessionAccess } from '../access/service.ts';
import { numberedPageSchema } from './inputs.ts';
import type { MessageWindow, SessionFilter, SessionPosition, SessionQuery, SessionRead, SessionStore } from './store.ts';

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

const sessionCursor = (s: SessionPosition) => encodeCursor('ses', `${s.updatedAt.toISOString()}|${s.id}`);
const sessionPosition = (cursor: string) =>
  decodeCursor('ses', cursor, (v) => {
    const [at, id] = v.split('|');
    const date = new Date(at ?? '');
    return id && !Number.isNaN(date.getTime()) ? { updatedAt: date, id } : null;
  });

/**
 * Which messages a page reads: `first`/`after` page forwards, `last`/`before` backwards; with
 * neither, the latest messages.
 */
function messageWindow(args: MessagePageArgs, maxBytes: number): MessageWindow {
  const size = (n: number | null | undefined) => {
    if (n == null) return DEFAULT_MESSAGE_PAGE;
    if (!Number.isInteger(n) || n < 0 || n > MAX_MESSAGE_PAGE)
      throw badInput(`must be a whole number from 0 to ${MAX_MESSAGE_PAGE}`, [args.first != null ? 'first' : 'last']);
    return n;
  };
  const after = args.after ? ordinalOf(args.after) : null;
  const before = args.before ? ordinalOf(args.before) : null;
  const forwards = args.first != null || (after !== null && args.last == null);
  return { after, before, forwards, take: size(forwards ? args.first : args.last), maxBytes };
}

/** A page as its readers see it, from what the window held. */
const messagePage = (w: MessageWindow, { messages, more }: { messages: MessageView[]; more: boolean }): MessagePage => ({
  messages,
  hasNextPage: w.forwards ? more : w.before !== null,
  hasPreviousPage: w.forwards ? w.after !== null : more,
  cursor: messageCursor,
});

const pageArgs = (page: { first?: unknown; after?: unknown } | undefined) =>
  parseInput(pageSchema, Object.fromEntries(Object.entries(page ?? {}).filter(([, v]) => v != null)));

/** Reading sessions and their messages, for whoever may see them. */
export function readRules(store: SessionStore, access: SessionAccess, work: { messagePageMaxBytes: number; listPageMaxBytes: number }) {
  async function list<Q extends SessionQuery>(filter: SessionFilter, page: { first?: unknown; after?: unknown } | undefined, query: Q) {
    const { first: limit, after } = pageArgs(page);
    const { sessions, next } = await store.sessions(filter, { from: after ? sessionPosition(after) : null, limit }, query);
    return { sessions, nextCursor: next ? sessionCursor(next) : null, cursor: sessionCursor };
  }

  return {
    async get<Q extends SessionQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<SessionRead<Q>> {
      await access.requireAccess(viewer, id);
      return store.session(id, query ?? ({} as Q));
    },

    /** Sessions the caller owns, newest activity first. */
    listMine<Q extends SessionQuery = object>(viewer: Viewer, page: { first?: unknown; after?: unknown }, query: Q = {} as Q) {
      return list({ ownedBy: viewer.id }, page, query);
    },

    /**
     * Sessions the caller owns or was added to, newest activity first, a numbered page at a time
     * with the total (the original's `GET /v2/sessions`); `agentKey` keeps those with that agent.
     */
    async pageOf<Q extends SessionQuery = object>(viewer: Viewer, raw: unknown, query: Q = {} as Q) {
      const { page, limit, agentKey, ...byId } = parseInput(numberedPageSchema, raw);
      let agentId = byId.agentId;
      if (agentKey !== undefined) {
        const agent = await store.userNamed(agentKey);
        if (agent?.type !== 'agent') throw notFound('Agent not found');
        agentId = agent.id;
      }
      const filter = { memberOf: viewer.id, agentId };
      const window = { page, limit, maxBytes: work.listPageMaxBytes };
      const { sessions, total, cut } = await store.numberedSessions(filter, window, query);
      return { sessions, total, page, limit, cut };
    },

    /** Sessions other users added the caller to, newest activity first (operation 1). */
    listShared<Q extends SessionQuery = object>(viewer: Viewer, page: { first?: unknown; after?: unknown }, query: Q = {} as Q) {
      return list({ sharedWith: viewer.id }, page, query);
    },

    /** One message, for whoever may read its session; an unknown id and a session out of reach answer alike. */
    async message(viewer: Viewer, id: string): Promise<MessageView> {
      const message = canNameARow(id) ? await store.message(id) : null;
      if (!message || !(await access.permissionIn(viewer, message.sessionId)))
        throw notFound('Message not found or you do not have access to it');
      return message;
    },

    /** A page of the session's messages, oldest first within the page. */
    async messages(viewer: Viewer, sessionId: string, args: MessagePageArgs): Promise<MessagePage> {
      await access.requireAccess(viewer, sessionId);
      const window = messageWindow(args, work.messagePageMaxBytes);
      return messagePage(window, await store.messages(sessionId, window));
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
    ): Promise<{ session: SessionRead<Q>; page: MessagePage }> {
      await access.requireAccess(viewer, id);
      const window = messageWindow(args, work.messagePageMaxBytes);
      const { session, page } = await store.sessionWithMessages(id, query, window);
      return { session, page: messagePage(window, page) };
    },
  };
}
