import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { printedSchema, schemaFile } from '../../src/graphql/print.ts';

describe('schema/schema.graphql', () => {
  it('matches the schema the code builds (run `npm run schema` after changing types)', async () => {
    expect(await readFile(schemaFile, 'utf8')).toBe(printedSchema());
  });

  it('has the types and root fields clients rely on', () => {
    const sdl = printedSchema();
    for (const type of [
      'Session',
      'Message',
      'Agent',
      'Concept',
      'Model',
      'Tool',
      'Creation',
      'Creator',
      'Deployment',
      'Trigger',
      'Share',
    ]) {
      expect(sdl).toMatch(new RegExp(`^type ${type} `, 'm'));
    }
    for (const field of ['me', 'agent', 'concept', 'model', 'tools', 'creation', 'deployments', 'triggers'])
      expect(sdl).toMatch(new RegExp(`^  ${field}[(:]`, 'm'));
    for (const field of [
      'updateAgent',
      'updateConcept',
      'likeCreation',
      'unlikeCreation',
      'deleteApiKey',
      'createAgent',
      'createConcept',
    ]) {
      expect(sdl).toMatch(new RegExp(`^  ${field}\\(`, 'm'));
    }
  });
});
