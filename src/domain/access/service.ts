import type { SessionPermission } from '../core/vocabulary.ts';
import { coalesced } from '../core/coalesce.ts';
import { forbidden, notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import type { Viewer } from '../core/viewer.ts';
import type { AccessStore, PlaceAsk } from './store.ts';

/**
 * Who may do what in a session. The owner and users added as `owner` may delete, share and
 * manage users; `editor`s may post and react; anyone else sees nothing of it.
 */
export type Permission = SessionPermission;

export const canPost = (p: Permission | null) => p === 'owner' || p === 'editor';
export const canManage = (p: Permission | null) => p === 'owner';

export const SESSION_NOT_FOUND = 'Session not found';
export const NO_ACCESS = 'You do not have access to this session';

/** The checks every session operation starts with: the caller's place in the session. */
export function sessionAccess(store: AccessStore) {
  /**
   * Read for the requests that arrive together in one statement: a thousand clients opening
   * their watches at once cost a few reads instead of a thousand.
   */
  const places = coalesced((asks: readonly PlaceAsk[]) => store.places(asks));

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

  return { permissionIn, requireAccess, requireManager };
}

export type SessionAccess = ReturnType<typeof sessionAccess>;
