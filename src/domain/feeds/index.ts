/** The feeds service's front: a user's own feed, watched over the bus. */
export { feedService } from './service.ts';
export type { FeedService } from './service.ts';
