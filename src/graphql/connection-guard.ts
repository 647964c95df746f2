import SchemaBuilder, { BasePlugin, decodeBase64, decodeCursorChunk, type PothosOutputFieldConfig, type SchemaTypes } from '@pothos/core';
import type { GraphQLFieldResolver } from 'graphql';
import { badInput } from '../domain/core/errors.ts';
import { getDatamodel } from '../generated/pothos-prisma-types.ts';

/**
 * Checks the paging arguments of every Prisma connection before Pothos reads them. Pothos
 * decodes whatever type a cursor's tag claims (`GPC:N:1` is the number 1, `GPC:D:x` an invalid
 * date, `GPC:J:{...}` an object) and hands it to Prisma as the position, where a value of the
 * wrong type is a query error, not bad input. Here a cursor must decode to a value that fits a
 * field the model can page by (its id or a unique field, or a compound of them), and `first` /
 * `last` must be usable; anything else is BAD_USER_INPUT before Pothos or Prisma see it.
 *
 * The arguments are read where Pothos reads them: a related connection's arguments when its
 * parent plans its query (`pothosPrismaSelect`, or `pothosPrismaFallback` for a parent loaded
 * elsewhere), and in its own resolver.
 */
export const connectionGuardPlugin = 'connectionGuard';

interface ConnectionArgs {
  first?: number | null;
  last?: number | null;
  after?: string | null;
  before?: string | null;
}

/** A Prisma scalar type name: String, Int, DateTime, ... */
type FieldType = string;

/** Each way a model's rows can be named uniquely: one field, or a compound (id or unique index). */
function cursorShapes(model: string): FieldType[][] {
  const { fields, primaryKey, uniqueIndexes } = getDatamodel().datamodel.models[model]!;
  const typeOf = (name: string) => fields.find((f) => f.name === name)!.type;
  return [
    ...fields.filter((f) => f.kind === 'scalar' && (f.isId || f.isUnique)).map((f) => [f.type]),
    ...[primaryKey, ...uniqueIndexes].flatMap((index) => (index ? [index.fields.map(typeOf)] : [])),
  ];
}

const INT_MAX = 2 ** 31 - 1;

/** Whether a decoded cursor part is a value Prisma accepts for a column of `type`. */
function fits(value: unknown, type: FieldType): boolean {
  switch (type) {
    case 'String':
      // PostgreSQL text cannot hold NUL; such a position names no row.
      return typeof value === 'string' && !value.includes('\u0000');
    case 'Int':
      return Number.isSafeInteger(value) && Math.abs(value as number) <= INT_MAX;
    case 'BigInt':
      return typeof value === 'bigint';
    case 'Float':
      return typeof value === 'number' && Number.isFinite(value);
    case 'Boolean':
      return typeof value === 'boolean';
    case 'DateTime':
      return value instanceof Date && !Number.isNaN(value.getTime());
    default:
      return false;
  }
}

function decodes(cursor: string, shapes: FieldType[][]): boolean {
  let value: unknown;
  try {
    const text = decodeBase64(cursor);
    if (!text.startsWith('GPC:')) return false;
    value = decodeCursorChunk(text.slice(4));
  } catch {
    return false;
  }
  const parts = Array.isArray(value) ? value : [value];
  return shapes.some(
    (shape) =>
      shape.length === parts.length && (Array.isArray(value) || shape.length === 1) && shape.every((type, i) => fits(parts[i], type)),
  );
}

function checkArgs(args: ConnectionArgs, shapes: FieldType[][]) {
  for (const name of ['first', 'last'] as const) {
    const n = args[name];
    if (n != null && (!Number.isInteger(n) || n < 0)) throw badInput('must not be negative', [name]);
  }
  if (args.after != null && args.before != null) throw badInput('Page with either after or before, not both', ['before']);
  if (args.after != null && args.last != null)
    throw badInput('Page forwards with first and after, or backwards with last and before', ['last']);
  if (args.before != null && args.first != null)
    throw badInput('Page forwards with first and after, or backwards with last and before', ['first']);
  for (const cursor of [args.after, args.before]) {
    if (cursor != null && !decodes(cursor, shapes)) throw badInput('Invalid cursor');
  }
}

/**
 * The same checks for a connection built with `prismaConnectionHelpers` (a page of join rows of
 * `model` by its unique field `cursor`), which this plugin cannot recognise: its field calls this
 * where it plans its query. Such a helper pages by that one field, so only its shape is a cursor.
 */
export const checkHelperConnectionArgs = (args: ConnectionArgs, model: string, cursor: string) =>
  checkArgs(args, [[getDatamodel().datamodel.models[model]!.fields.find((f) => f.name === cursor)!.type]]);

/** Calls `fn` after checking the connection arguments at position `at` of its parameters. */
const guarded = <F extends (...params: never[]) => unknown>(fn: F, at: number, shapes: FieldType[][]): F =>
  ((...params: Parameters<F>) => {
    checkArgs(params[at] as unknown as ConnectionArgs, shapes);
    return fn(...params);
  }) as F;

/**
 * A root `prismaConnection` carries no mark of its model, so such fields name it in this
 * extension to be checked like related connections.
 */
export const guardedConnection = (model: string) => ({ [GUARDED_MODEL]: model });
const GUARDED_MODEL = 'connectionGuardModel';

/** The cursor shapes of a Prisma connection's model, or null for any other field. */
function prismaConnectionShapes(fieldConfig: { args: Record<string, unknown>; extensions?: Record<string, unknown> | null }) {
  const root = fieldConfig.extensions?.[GUARDED_MODEL];
  if (typeof root === 'string') return cursorShapes(root);
  const relation = fieldConfig.extensions?.pothosPrismaRelationField as { type: string } | undefined;
  return relation && fieldConfig.args.after && typeof fieldConfig.extensions?.pothosPrismaSelect === 'function'
    ? cursorShapes(relation.type)
    : null;
}

export class ConnectionGuardPlugin<Types extends SchemaTypes> extends BasePlugin<Types> {
  override onOutputFieldConfig(fieldConfig: PothosOutputFieldConfig<Types>): PothosOutputFieldConfig<Types> {
    const shapes = prismaConnectionShapes(fieldConfig);
    if (!shapes || typeof fieldConfig.extensions?.[GUARDED_MODEL] === 'string') return fieldConfig;
    const extensions = fieldConfig.extensions as Record<string, (...params: never[]) => unknown>;
    const { pothosPrismaSelect: select, pothosPrismaFallback: fallback } = extensions;
    return {
      ...fieldConfig,
      extensions: {
        ...extensions,
        pothosPrismaSelect: guarded(select!, 0, shapes),
        ...(fallback ? { pothosPrismaFallback: guarded(fallback, 2, shapes) } : {}),
      },
    };
  }

  override wrapResolve(resolver: GraphQLFieldResolver<unknown, Types['Context'], object>, fieldConfig: PothosOutputFieldConfig<Types>) {
    const shapes = prismaConnectionShapes(fieldConfig);
    return shapes ? guarded(resolver, 1, shapes) : resolver;
  }
}

declare global {
  export namespace PothosSchemaTypes {
    export interface Plugins<Types extends SchemaTypes> {
      connectionGuard: ConnectionGuardPlugin<Types>;
    }
  }
}

SchemaBuilder.registerPlugin(connectionGuardPlugin, ConnectionGuardPlugin);
