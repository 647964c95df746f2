import type { EventBus } from '../core/bus.ts';
import { badInput, forbidden, notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { canManage, type SessionAccess } from '../access/service.ts';
import { sessionUserSchema } from './inputs.ts';
import type { SignalOutbox } from '../signals/service.ts';
import type { SessionStore } from './store.ts';

export const NOT_ALLOWED_TO_DELETE = 'You are not allowed to delete this session';
const NOT_A_MEMBER = 'That user is not in this session';

export interface MemberDependencies {
  store: SessionStore;
  bus: EventBus;
  access: SessionAccess;
  /** Carries what takes access away to every instance, even when the bus is away at the moment of the change. */
  signals: Pick<SignalOutbox, 'deliver'>;
}

/** Who is in a session, and its end: the changes that take access away announce themselves through the outbox. */
export function memberRules({ store, bus, access, signals }: MemberDependencies) {
  return {
    /** Operation 9: owners only; messages, shares and reactions go with it, and watchers are told. */
    async delete(viewer: Viewer, id: string) {
      const permission = await access.permissionIn(viewer, id);
      if (!canManage(permission)) throw forbidden(NOT_ALLOWED_TO_DELETE);
      await bus.cancelReplies({ sessionId: id, reason: 'deleted' });
      const signal = { kind: 'event', sessionId: id, event: { type: 'session_deleted' } } as const;
      await signals.deliver(await store.deleteSession(id, signal), signal);
    },

    /** Adds a user to the session, or changes their permission. */
    async addUser(viewer: Viewer, sessionId: string, raw: unknown) {
      await access.requireManager(viewer, sessionId, 'add or remove users');
      const { username, permission } = parseInput(sessionUserSchema, raw);
      const user = await store.userNamed(username);
      if (user?.type !== 'user') throw notFound('User not found');
      if (user.id === (await store.ownerOf(sessionId))) throw badInput("The session's owner always keeps the owner permission");
      await store.setMember(sessionId, user.id, permission);
      await bus.publish(sessionId, { type: 'user_added', userId: user.id, permission });
      return { userId: user.id, permission };
    },

    /** Removes a user (owners may remove anyone but the owner; anyone may leave). */
    async removeUser(viewer: Viewer, sessionId: string, userId: string) {
      if (userId !== viewer.id) await access.requireManager(viewer, sessionId, 'add or remove users');
      else await access.requireAccess(viewer, sessionId);
      if (userId === (await store.ownerOf(sessionId))) throw badInput("The session's owner cannot be removed");
      if (!canNameARow(userId)) throw notFound(NOT_A_MEMBER);
      const signal = { kind: 'event', sessionId, event: { type: 'user_removed', userId } } as const;
      const signalId = await store.removeMember(sessionId, userId, signal);
      if (signalId === null) throw notFound(NOT_A_MEMBER);
      await signals.deliver(signalId, signal);
    },
  };
}
