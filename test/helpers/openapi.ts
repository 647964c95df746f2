/**
 * Reading an OpenAPI 3.1 document the way a client generator would: following `$ref`s, and
 * checking values against its schemas (the JSON Schema keywords parley's document uses).
 */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type SchemaObject = { [key: string]: any };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Every `$ref` value anywhere in the document. */
export function refsIn(value: unknown, found: string[] = []): string[] {
  if (Array.isArray(value)) for (const v of value) refsIn(v, found);
  else if (isObject(value)) {
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string') found.push(v);
      else refsIn(v, found);
    }
  }
  return found;
}

/** What a local reference (`#/components/schemas/Agent`) points to, or undefined. */
export function resolveRef(doc: unknown, ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  return ref
    .slice(2)
    .split('/')
    .map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce<unknown>((node, part) => (isObject(node) && Object.hasOwn(node, part) ? node[part] : undefined), doc);
}

/** Follows `$ref`s until a schema with content. */
export function deref(doc: unknown, schema: SchemaObject): SchemaObject {
  let current = schema;
  while (typeof current.$ref === 'string') current = resolveRef(doc, current.$ref) as SchemaObject;
  return current;
}

const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

function typeMatches(type: string, value: unknown) {
  switch (type) {
    case 'null':
      return value === null;
    case 'boolean':
      return typeof value === 'boolean';
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'integer':
      return Number.isInteger(value);
    case 'array':
      return Array.isArray(value);
    case 'object':
      return isObject(value);
    default:
      throw new Error(`schema type ${type} is not handled here`);
  }
}

/**
 * Why `value` does not match `schema` (empty when it does), each with the JSON path at fault.
 * `closed`: a field an object schema does not declare is a problem too (JSON Schema allows it),
 * to find what a server sends without documenting it.
 */
export function schemaProblems(
  doc: unknown,
  schema: SchemaObject,
  value: unknown,
  options: { closed?: boolean } = {},
  path = '$',
): string[] {
  if (typeof schema.$ref === 'string') {
    const target = resolveRef(doc, schema.$ref);
    if (!isObject(target)) return [`${path}: unresolved ${schema.$ref}`];
    return schemaProblems(doc, target, value, options, path);
  }
  const problems: string[] = [];
  const matching = (candidates: SchemaObject[]) =>
    candidates.filter((s) => schemaProblems(doc, s, value, options, path).length === 0).length;
  if (Array.isArray(schema.anyOf) && matching(schema.anyOf) === 0)
    problems.push(`${path}: matches none of anyOf (${JSON.stringify(value)?.slice(0, 200)})`);
  if (Array.isArray(schema.oneOf) && matching(schema.oneOf) !== 1)
    problems.push(`${path}: matches ${matching(schema.oneOf)} of oneOf (${JSON.stringify(value)?.slice(0, 200)})`);
  for (const part of schema.allOf ?? []) problems.push(...schemaProblems(doc, part, value, options, path));
  if (Array.isArray(schema.enum) && !schema.enum.some((e: unknown) => JSON.stringify(e) === JSON.stringify(value)))
    problems.push(`${path}: ${JSON.stringify(value)} is not one of ${JSON.stringify(schema.enum)}`);
  if (schema.type !== undefined) {
    const types: string[] = [schema.type].flat();
    if (!types.some((t) => typeMatches(t, value)))
      return [...problems, `${path}: ${JSON.stringify(value)?.slice(0, 100)} is not ${types.join(' or ')}`];
  }
  if (isObject(value)) {
    for (const key of schema.required ?? []) if (!Object.hasOwn(value, key)) problems.push(`${path}: missing ${key}`);
    for (const [key, v] of Object.entries(value)) {
      const declared = schema.properties?.[key];
      if (declared) problems.push(...schemaProblems(doc, declared, v, options, `${path}.${key}`));
      else if (isObject(schema.additionalProperties))
        problems.push(...schemaProblems(doc, schema.additionalProperties, v, options, `${path}.${key}`));
      else if (schema.properties && (schema.additionalProperties === false || options.closed))
        problems.push(`${path}: ${key} is not a documented field`);
    }
  }
  if (Array.isArray(value) && isObject(schema.items))
    value.forEach((v, i) => problems.push(...schemaProblems(doc, schema.items, v, options, `${path}[${i}]`)));
  if (typeof value === 'string') {
    if (schema.format === 'date-time' && !ISO_DATE_TIME.test(value)) problems.push(`${path}: ${value} is not a date-time`);
    if (typeof schema.pattern === 'string' && !new RegExp(schema.pattern, 'u').test(value))
      problems.push(`${path}: ${value} does not match ${schema.pattern}`);
  }
  if (typeof value === 'number') {
    if (typeof schema.minimum === 'number' && value < schema.minimum) problems.push(`${path}: ${value} < ${schema.minimum}`);
    if (typeof schema.maximum === 'number' && value > schema.maximum) problems.push(`${path}: ${value} > ${schema.maximum}`);
  }
  return problems;
}

/** The routes of a Fastify app, from `printRoutes({ commonPrefix: false })`: full path → methods. */
export function routesFromPrintout(printout: string): Map<string, string[]> {
  const routes = new Map<string, string[]>();
  const stack: string[] = [];
  for (const line of printout.split('\n')) {
    const match = /^([│ ]*)[├└]── (\S+) \(([^)]+)\)$/.exec(line);
    if (!match) continue;
    const depth = match[1]!.length / 4;
    stack.length = depth;
    stack.push(match[2]!);
    routes.set(stack.join(''), match[3]!.split(', '));
  }
  return routes;
}
