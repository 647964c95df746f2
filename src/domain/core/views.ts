import type { ReactionsView, ReactionTotal } from './events.ts';

/** Who reacted how to a message, from its reaction rows in the order they were made. */
export function reactionsView(rows: { userId: string; reaction: string }[]): ReactionsView {
  const out: ReactionsView = {};
  for (const r of rows) (out[r.userId] ??= []).push(r.reaction);
  return out;
}

/** Reaction totals, for views that must not reveal who reacted (shares). */
export function reactionCounts(reactions: ReactionsView): ReactionTotal[] {
  const counts = new Map<string, number>();
  for (const list of Object.values(reactions)) for (const r of list) counts.set(r, (counts.get(r) ?? 0) + 1);
  return [...counts].map(([reaction, count]) => ({ reaction, count }));
}
