import type { FeedEvent, FeedEventOf, FeedEventType } from '../domain/core/feed-events.ts';
import type { Viewer } from '../domain/core/viewer.ts';
import { builder } from './builder.ts';
import { type GraphQLContext, viewerOf } from './context.ts';
import { deliver } from './watch-results.ts';

type ObjectFields<T> = NonNullable<Parameters<ReturnType<typeof builder.objectRef<T>>['implement']>[0]['fields']>;

/** How one type of feed event shows in GraphQL: its object type's name, description and own fields. */
export interface FeedEventTypeSpec<T extends FeedEventType> {
  name: string;
  description: string;
  fields: ObjectFields<FeedEventOf<T>>;
}

/** One spec per event type of a family: a type of the family left out does not compile. */
export type FeedEventTypeSpecs<T extends FeedEventType> = { [K in T]: FeedEventTypeSpec<K> };

/**
 * A family of feed events (a task's, a trigger's) as a GraphQL interface with the fields every
 * event has (`seq`, to resume with `after`; `type`, as REST names it; `at`), implemented by one
 * object type per event type. The interface is what the family's subscription field returns.
 */
export function feedEventInterface<T extends FeedEventType>(name: string, description: string, specs: FeedEventTypeSpecs<T>) {
  const byType = specs as Record<FeedEventType, FeedEventTypeSpec<FeedEventType> | undefined>;
  const ref = builder.interfaceRef<FeedEvent>(name).implement({
    description: `${description} \`seq\` grows with every event of your feed: resume with after: seq.`,
    // Named from the event's own type: progress events would otherwise be tried against each type in turn.
    resolveType: (e) => byType[e.type]!.name,
    fields: (t) => ({
      seq: t.expose('seq', { type: 'Seq' }),
      type: t.exposeString('type', { description: 'The event type as REST streams name it.' }),
      at: t.field({ type: 'DateTime', resolve: (e) => new Date(e.at) }),
    }),
  });
  for (const type of Object.keys(specs) as T[]) {
    const spec = byType[type]!;
    builder.objectRef<FeedEventOf<typeof type>>(spec.name).implement({
      description: spec.description,
      interfaces: [ref],
      isTypeOf: (e) => (e as FeedEvent).type === type,
      fields: spec.fields as ObjectFields<FeedEventOf<typeof type>>,
    });
  }
  return ref;
}

/** Narrows a subscription to what its arguments name (one task): checked first, so a wrong id fails up front. */
export type FeedNarrowing<T extends FeedEventType, A> = (
  args: A,
  viewer: Viewer,
  ctx: GraphQLContext,
) => ((event: FeedEventOf<T>) => boolean) | undefined | Promise<((event: FeedEventOf<T>) => boolean) | undefined>;

/**
 * `subscribe` and `resolve` of a subscription field over the caller's own feed, to spread into
 * `t.field` beside its `type` (a `feedEventInterface`) and `args` (with `after: t.arg({ type: 'Seq' })`).
 * It watches the events of `types` that `narrow` accepts, over graphql-ws and GraphQL over SSE
 * alike, resumed with `after`; an early end is an error with its code and `lastSeq`.
 */
export function followFeed<T extends FeedEventType, A extends { after?: number | null }>(
  types: readonly T[],
  narrow?: FeedNarrowing<T, A>,
) {
  return {
    subscribe: async (_root: unknown, args: A, ctx: GraphQLContext) => {
      const viewer = viewerOf(ctx);
      const where = await narrow?.(args, viewer, ctx);
      return ctx.services.feeds.watch(viewer, { after: args.after ?? undefined, types, where });
    },
    resolve: deliver as never,
  };
}
