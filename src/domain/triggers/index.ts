/** The triggers service's front: its rules, a trigger's status and schedule as shown, and its events. */
export type { TriggerEvent } from './ports.ts';
export { classicCron, splitCron } from './schedule.ts';
export { statusOf, triggerService } from './service.ts';
export type { TriggerService } from './service.ts';
export { triggerStore } from './store.ts';
