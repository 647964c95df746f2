import { describe, expect, expectTypeOf, it } from 'vitest';
import * as domain from '../../src/domain/core/vocabulary.ts';
import * as schema from '../../src/generated/prisma/enums.ts';

// The stores hand the database's enum values to the rules as the domain's own (no mapping but
// the identity), which holds only while the two lists are the same, value for value.
describe("the domain's vocabulary", () => {
  it('declares every enum of the database schema, with the same values', () => {
    expect(Object.keys(schema).length).toBeGreaterThan(10);
    expect(domain).toEqual(schema);
  });

  it('gives them the same types, so a store passes a row on as it reads it', () => {
    expectTypeOf<domain.TaskStatus>().toEqualTypeOf<schema.TaskStatus>();
    expectTypeOf<domain.MessageStatus>().toEqualTypeOf<schema.MessageStatus>();
    expectTypeOf<domain.DeploymentPlatform>().toEqualTypeOf<schema.DeploymentPlatform>();
    expectTypeOf<domain.OwnerPays>().toEqualTypeOf<schema.OwnerPays>();
  });
});
