import { fileURLToPath } from 'node:url';
import { printSchema } from 'graphql';
import { schema } from './schema.ts';

export const schemaFile = fileURLToPath(new URL('../../schema/schema.graphql', import.meta.url));

export const printedSchema = () => `${printSchema(schema)}\n`;
