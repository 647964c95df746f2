// Rewrites schema/schema.graphql from the code (`npm run schema`); a test fails when they differ.
import { writeFile } from 'node:fs/promises';
import { printedSchema, schemaFile } from '../src/graphql/print.ts';

await writeFile(schemaFile, printedSchema());
console.log(`wrote ${schemaFile}`);
