// Prints the SQL that takes the database from one Prisma schema to another, offline:
//   npx tsx scripts/migration-diff.ts [previous-schema.prisma] > migration.sql
// With no argument it diffs from an empty database (the first migration). Take the previous
// schema from git (`git show HEAD:prisma/schema.prisma > /tmp/prev.prisma`).
import { readFile } from 'node:fs/promises';
import { PGlite } from '@electric-sql/pglite';
import { PrismaPGlite } from 'pglite-prisma-adapter';
import { noFilters, openSchemaEngine } from '../src/db/schema-engine.ts';

const current = await readFile('prisma/schema.prisma', 'utf8');
const previousPath = process.argv[2];
const engine = await openSchemaEngine(new PrismaPGlite(new PGlite()), [['schema.prisma', current]]);
const from = previousPath
  ? { tag: 'schemaDatamodel' as const, files: [{ path: previousPath, content: await readFile(previousPath, 'utf8') }] }
  : { tag: 'empty' as const };
const to = { tag: 'schemaDatamodel' as const, files: [{ path: 'prisma/schema.prisma', content: current }] };
const result = await engine.diff({ from, to, script: true, exitCode: null, filters: noFilters } as Parameters<typeof engine.diff>[0]);
process.stdout.write(result.stdout ?? '');
