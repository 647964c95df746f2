import type { Viewer } from './viewer.ts';

/**
 * The service's one sharing rule for agents, concepts, models and creations: a row is visible
 * to its owner, and to everyone when it is public. This is the rule for a row in hand; the
 * statements that select only visible rows take it from src/domain/discovery/store.ts, which
 * writes this same rule as a Prisma filter and as SQL (a test holds the three forms together).
 */
export const isVisibleTo = (viewer: Viewer | null, row: { public: boolean }, ownerId: string) => row.public || viewer?.id === ownerId;
