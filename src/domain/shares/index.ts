/** The shares service's front: its rules and the shared session as they show it. */
export { prismaShareStore } from './prisma-store.ts';
export { shareService } from './service.ts';
export type { SharedPerson, SharedSession, ShareService } from './service.ts';
