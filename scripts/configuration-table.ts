// Rewrites the table of settings in docs/configuration.md from their declarations in
// src/config.ts (`npx tsx scripts/configuration-table.ts`); test/config.test.ts fails when they differ.
import { readFile, writeFile } from 'node:fs/promises';
import { settings } from '../src/config.ts';
import { markdownTable, tableInDocument } from '../src/settings.ts';

const file = new URL('../docs/configuration.md', import.meta.url);
const document = await readFile(file, 'utf8');
const { before, after } = tableInDocument(document);
await writeFile(file, `${before}${markdownTable(settings)}\n${after}`);
console.log(`wrote ${file.pathname}`);
