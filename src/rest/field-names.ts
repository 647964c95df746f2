/**
 * REST bodies use the original service's snake_case names where the domain uses camelCase.
 * One table per resource maps both ways: request bodies in, error paths and responses out.
 * The tables are Maps: names come from callers, and a plain object would answer `constructor`
 * or `__proto__` from its prototype.
 */
export function fieldNames(table: Record<string, string>) {
  const domainToRest = new Map(Object.entries(table));
  const restToDomain = new Map(Object.entries(table).map(([d, r]) => [r, d]));
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

  /** Renames keys of a request body; `nested` names the REST fields whose contents are renamed too. */
  const toDomain = (body: unknown, nested: readonly string[] = []): unknown => {
    if (!isObject(body)) return body;
    return Object.fromEntries(
      Object.entries(body).map(([key, value]) => {
        const inner = nested.includes(key)
          ? Array.isArray(value)
            ? value.map((v) => toDomain(v))
            : toDomain(value)
          : value;
        return [restToDomain.get(key) ?? key, inner];
      }),
    );
  };

  return { toDomain, toRest: (domainName: string) => domainToRest.get(domainName) ?? domainName };
}
