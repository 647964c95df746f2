/** The creators service's front: its rules, a username's rule and a creator's balance. */
export { balanceOf, creatorService, usernameSchema } from './service.ts';
export type { CreatorService } from './service.ts';
export { creatorStore } from './store.ts';
