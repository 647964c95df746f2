import type { SessionPermission } from '../../generated/prisma/enums.ts';

/**
 * Who may do what in a session. The owner and users added as `owner` may delete, share and
 * manage users; `editor`s may post and react; anyone else sees nothing of it.
 */
export type Permission = SessionPermission;

export const canPost = (p: Permission | null) => p === 'owner' || p === 'editor';
export const canManage = (p: Permission | null) => p === 'owner';

export const SESSION_NOT_FOUND = 'Session not found';
export const NO_ACCESS = 'You do not have access to this session';
