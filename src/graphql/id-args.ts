import SchemaBuilder, { BasePlugin, type PothosOutputFieldConfig, type SchemaTypes } from '@pothos/core';
import {
  getNullableType,
  GraphQLID,
  type GraphQLFieldResolver,
  type GraphQLInputType,
  type GraphQLResolveInfo,
  isInputObjectType,
  isListType,
} from 'graphql';
import { rawIdOf } from './global-ids.ts';

/**
 * Every `ID` a client sends, in an argument or anywhere inside an input object, reaches the
 * resolvers as the database id: a Relay global id is unwrapped, a raw id passes as it is. So
 * clients that kept the raw ids of before and clients that use the global ids both work, and no
 * resolver has to care. Fields that need the global form itself (`node`, `nodes`) opt out with
 * the `keepGlobalIds` extension.
 */
export const idArgsPlugin = 'idArgs';
export const keepGlobalIds = { keepGlobalIds: true };

type Decode = (value: unknown) => unknown;

const decodeId: Decode = (value) => (typeof value === 'string' ? rawIdOf(value) : value);

/** How to unwrap the ids inside a value of `type`, or null when it holds none. */
function decoderFor(type: GraphQLInputType, seen: Set<unknown>): Decode | null {
  const nullable = getNullableType(type);
  if (nullable === GraphQLID) return decodeId;
  if (isListType(nullable)) {
    const item = decoderFor(nullable.ofType, seen);
    return item && ((value) => (Array.isArray(value) ? value.map((v) => (v == null ? v : item(v))) : value == null ? value : item(value)));
  }
  if (!isInputObjectType(nullable) || seen.has(nullable)) return null;
  seen.add(nullable);
  const fields = Object.values(nullable.getFields()).flatMap((field) => {
    const decode = decoderFor(field.type, seen);
    return decode ? [[field.name, decode] as const] : [];
  });
  seen.delete(nullable);
  if (!fields.length) return null;
  return (value) => {
    if (value == null || typeof value !== 'object') return value;
    const copy: Record<string, unknown> = { ...value };
    for (const [name, decode] of fields) if (copy[name] != null) copy[name] = decode(copy[name]);
    return copy;
  };
}

function argsDecoder(info: GraphQLResolveInfo): Decode | null {
  const field = info.parentType.getFields()[info.fieldName]!;
  const decoders = field.args.flatMap((arg) => {
    const decode = decoderFor(arg.type, new Set());
    return decode ? [[arg.name, decode] as const] : [];
  });
  if (!decoders.length) return null;
  return (args) => {
    const copy: Record<string, unknown> = { ...(args as object) };
    for (const [name, decode] of decoders) if (copy[name] != null) copy[name] = decode(copy[name]);
    return copy;
  };
}

/** Wraps a resolver (or subscriber) so it sees raw ids; the decoder is worked out once per field. */
// biome-ignore lint/suspicious/noExplicitAny: any resolver's context passes through untouched
function unwrapping<F extends GraphQLFieldResolver<unknown, any, object>>(fn: F): F {
  let decoder: Decode | null | undefined;
  return ((parent, args, ctx, info) => {
    decoder ??= argsDecoder(info) ?? ((a) => a);
    return fn(parent, decoder(args) as object, ctx, info);
  }) as F;
}

export class IdArgsPlugin<Types extends SchemaTypes> extends BasePlugin<Types> {
  private applies(fieldConfig: PothosOutputFieldConfig<Types>) {
    return Object.keys(fieldConfig.args).length > 0 && !fieldConfig.extensions?.keepGlobalIds;
  }

  override wrapResolve(resolver: GraphQLFieldResolver<unknown, Types['Context'], object>, fieldConfig: PothosOutputFieldConfig<Types>) {
    return this.applies(fieldConfig) ? unwrapping(resolver) : resolver;
  }

  override wrapSubscribe(
    subscribe: GraphQLFieldResolver<unknown, Types['Context'], object> | undefined,
    fieldConfig: PothosOutputFieldConfig<Types>,
  ) {
    return subscribe && this.applies(fieldConfig) ? unwrapping(subscribe) : subscribe;
  }
}

declare global {
  export namespace PothosSchemaTypes {
    export interface Plugins<Types extends SchemaTypes> {
      idArgs: IdArgsPlugin<Types>;
    }
  }
}

SchemaBuilder.registerPlugin(idArgsPlugin, IdArgsPlugin);
