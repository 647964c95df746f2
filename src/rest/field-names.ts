import type { z } from 'zod';

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
        const inner = nested.includes(key) ? (Array.isArray(value) ? value.map((v) => toDomain(v)) : toDomain(value)) : value;
        return [restToDomain.get(key) ?? key, inner];
      }),
    );
  };

  const toRest = (domainName: string) => domainToRest.get(domainName) ?? domainName;

  /**
   * A domain input schema as REST callers spell it: the same rules (limits, enums, defaults),
   * with the keys of its objects renamed at every depth. It describes REST bodies (OpenAPI);
   * requests themselves are still checked by the domain schema, after `toDomain`.
   */
  function schema(domain: z.ZodObject): z.ZodObject;
  function schema(domain: z.ZodType): z.ZodType;
  function schema(domain: z.ZodType): z.ZodType {
    const def = domain._zod.def as WrapperDef;
    const inner = (key: keyof WrapperDef) => domain.clone({ ...def, [key]: schema(def[key] as z.ZodType) } as typeof domain._zod.def);
    switch (def.type) {
      case 'object':
        return domain.clone({
          ...def,
          shape: Object.fromEntries(Object.entries(def.shape!).map(([key, value]) => [toRest(key), schema(value)])),
        } as typeof domain._zod.def);
      case 'array':
        return inner('element');
      case 'record':
        return inner('valueType');
      case 'optional':
      case 'nullable':
      case 'default':
      case 'prefault':
      case 'readonly':
        return inner('innerType');
      case 'pipe':
        return domain.clone({ ...def, in: schema(def.in!), out: schema(def.out!) } as typeof domain._zod.def);
      case 'union':
        return domain.clone({ ...def, options: def.options!.map(schema) } as typeof domain._zod.def);
      default:
        return domain;
    }
  }

  return { toDomain, toRest, schema };
}

/** The parts of zod's schema definitions that hold other schemas. */
interface WrapperDef {
  type: string;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
  valueType?: z.ZodType;
  innerType?: z.ZodType;
  in?: z.ZodType;
  out?: z.ZodType;
  options?: z.ZodType[];
}
