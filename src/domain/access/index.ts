/**
 * The access service's front: who may do what in a session (`service.ts`, which every session
 * operation starts with), the gate that keeps open watches honest about it (`gate.ts`), their
 * error texts, and how they are composed.
 */
export {
  canManage,
  canPost,
  NO_ACCESS,
  type Permission,
  SESSION_NOT_FOUND,
  type SessionAccess,
  sessionAccess,
} from './service.ts';
export { type AccessGate, accessGate } from './gate.ts';
export type { AccessStore, PlaceAsk, WatchAccessStore } from './store.ts';
export { prismaAccessStore, prismaWatchAccessStore } from './prisma-store.ts';
