/**
 * A Relay connection from a page the domain read: its nodes with their cursors and whether there
 * is more either way. The one place `pageInfo` is put together.
 */
export function toConnection<T, Extra extends object = object>(
  nodes: readonly T[],
  cursor: (node: T) => string,
  more: { hasNextPage: boolean; hasPreviousPage: boolean },
  extra?: Extra,
) {
  const edges = nodes.map((node) => ({ cursor: cursor(node), node }));
  return {
    ...(extra as Extra),
    edges,
    pageInfo: { ...more, startCursor: edges[0]?.cursor ?? null, endCursor: edges.at(-1)?.cursor ?? null },
  };
}
