/**
 * The autonomy service's front: sessions that reply on their own (`docs/autonomy.md`), its error
 * text, its queues, and how it is composed. Its settings are part of a session's
 * (`sessions/inputs.ts`), which the sessions service checks with this one.
 */
export {
  AUTO_REPLY_NEEDS_BUDGET,
  type AutonomyDependencies,
  type AutonomyRules,
  autonomyRules,
  GIVEN_UP_QUEUE,
  TURN_QUEUE,
} from './service.ts';
export type { AutonomyStanding, AutonomyState, AutonomyStore, TurnStart } from './store.ts';
export { prismaAutonomyStore } from './prisma-store.ts';
