import { describe, expect, it } from 'vitest';
import { CREATION_NOT_FOUND, LIKE_NOT_FOUND, NOT_CREATION_OWNER, creationService } from '../../src/domain/creations/service.ts';
import { Catalog, memoryCreationStore } from './support/catalog.ts';

/**
 * The creations' rules over a store in memory: who sees a creation, a like given once and
 * counted with it, and changes to several creations made all or none, each refusal naming the
 * creation at fault by its place in the list.
 */
function world() {
  const c = new Catalog();
  const creations = creationService(memoryCreationStore(c));
  return { c, creations, owner: c.user('owner'), stranger: c.user('stranger') };
}

const refusal = (code: string, message: string, fieldPath?: (string | number)[]) => expect.objectContaining({ code, message, fieldPath });

describe('creations', () => {
  it('shows a creation to its owner, a public one to anyone, a deleted one to no one', async () => {
    const { c, creations, owner, stranger } = world();
    const hidden = c.creation(owner);
    const shown = c.creation(owner, { public: true });
    const gone = c.creation(owner, { public: true, deleted: true });
    expect(await creations.get(stranger, shown.id)).toMatchObject({ id: shown.id });
    expect(await creations.get(owner, hidden.id)).toMatchObject({ id: hidden.id });
    await expect(creations.get(stranger, hidden.id)).rejects.toEqual(refusal('NOT_FOUND', CREATION_NOT_FOUND));
    await expect(creations.get(owner, gone.id)).rejects.toEqual(refusal('NOT_FOUND', CREATION_NOT_FOUND));
  });

  it('counts a like once, and an unlike only of a like there is', async () => {
    const { c, creations, owner, stranger } = world();
    const shown = c.creation(owner, { public: true });
    expect(await creations.like(stranger, shown.id)).toMatchObject({ likeCount: 1 });
    await expect(creations.like(stranger, shown.id)).rejects.toEqual(refusal('BAD_USER_INPUT', 'Creation already liked by user'));
    expect(await creations.like(owner, shown.id)).toMatchObject({ likeCount: 2 });
    expect(await creations.unlike(stranger, shown.id)).toMatchObject({ likeCount: 1 });
    await expect(creations.unlike(stranger, shown.id)).rejects.toEqual(refusal('NOT_FOUND', LIKE_NOT_FOUND));
    expect(c.creations.get(shown.id)?.likeCount).toBe(1);
  });

  it('refuses a like of a creation the viewer cannot see as not found', async () => {
    const { c, creations, owner, stranger } = world();
    const hidden = c.creation(owner);
    await expect(creations.like(stranger, hidden.id)).rejects.toEqual(refusal('NOT_FOUND', CREATION_NOT_FOUND));
    await expect(creations.unlike(stranger, hidden.id)).rejects.toEqual(refusal('NOT_FOUND', CREATION_NOT_FOUND));
    expect(c.writes).toEqual([]);
  });

  it('lets only the owner change a creation: a private one is not found by a stranger, a public one is not theirs', async () => {
    const { c, creations, owner, stranger } = world();
    const hidden = c.creation(owner);
    const shown = c.creation(owner, { public: true });
    await expect(creations.update(stranger, hidden.id, { name: 'x' })).rejects.toEqual(refusal('NOT_FOUND', CREATION_NOT_FOUND));
    await expect(creations.update(stranger, shown.id, { name: 'x' })).rejects.toEqual(refusal('FORBIDDEN', NOT_CREATION_OWNER));
    await expect(creations.update(owner, shown.id, {})).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'No creation fields to update in the request'),
    );
    await expect(creations.update(owner, shown.id, { name: ' ' })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'must not be empty', ['name']),
    );
    expect(c.writes).toEqual([]);
    expect(await creations.update(owner, shown.id, { name: 'Sunset', public: false })).toMatchObject({ name: 'Sunset', public: false });
  });

  it('changes several creations all or none, naming the first one at fault by its place', async () => {
    const { c, creations, owner, stranger } = world();
    const mine = c.creation(owner);
    const theirs = c.creation(stranger, { public: true });
    const hidden = c.creation(stranger);
    await expect(creations.updateMany(owner, { creationIds: [mine.id, theirs.id], public: true })).rejects.toEqual(
      refusal('FORBIDDEN', NOT_CREATION_OWNER, ['creationIds', 1]),
    );
    await expect(creations.updateMany(owner, { creationIds: [mine.id, hidden.id], public: true })).rejects.toEqual(
      refusal('NOT_FOUND', CREATION_NOT_FOUND, ['creationIds', 1]),
    );
    expect(c.writes).toEqual([]);
    expect(c.creations.get(mine.id)?.public).toBe(false);
    const other = c.creation(owner);
    const changed = await creations.updateMany(owner, { creationIds: [other.id, mine.id, other.id], deleted: true });
    expect(changed.map((x) => [x.id, x.deleted])).toEqual([
      [other.id, true],
      [mine.id, true],
    ]);
    await expect(creations.get(owner, mine.id)).rejects.toEqual(refusal('NOT_FOUND', CREATION_NOT_FOUND));
  });

  it('bounds a change of several creations', async () => {
    const { creations, owner } = world();
    const many = Array.from({ length: 101 }, (_, i) => `c-${i}`);
    await expect(creations.updateMany(owner, { creationIds: many, public: true })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'must name at most 100 creations', ['creationIds']),
    );
    await expect(creations.updateMany(owner, { creationIds: [], public: true })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'must name at least one creation', ['creationIds']),
    );
    await expect(creations.updateMany(owner, { creationIds: ['c-1'] })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'No creation fields to update in the request'),
    );
  });
});
