import { describe, expect, it } from 'vitest';
import { collectionService } from '../../src/domain/collections/service.ts';
import { canHold, isShownIn } from '../../src/domain/collections/rules.ts';
import type { Collection, CollectionStore } from '../../src/domain/collections/store.ts';

/**
 * The collection rules (who reads, who changes, what goes in, what a reader is shown) over a
 * store kept in memory that answers with the rules for rows in hand: the service decides from
 * what the store says, with no database. `collection-visibility.test.ts` holds the real store's
 * statements to the same rules.
 */
interface MemoryCreation {
  id: string;
  userId: string;
  public: boolean;
  deleted: boolean;
}

function memoryStore() {
  const collections = new Map<string, Collection>();
  const items = new Map<string, string[]>();
  const creations = new Map<string, MemoryCreation>();
  const writes: string[] = [];
  const lookedUp: string[] = [];
  let next = 0;
  const shownTo = (viewer: { id: string }, collection: Pick<Collection, 'id' | 'userId'>) =>
    (items.get(collection.id) ?? []).filter((id) => isShownIn(viewer, collection, creations.get(id)!));

  const store: CollectionStore = {
    async find(id) {
      lookedUp.push(id);
      return (collections.get(id) ?? null) as never;
    },
    async create(ownerId, input, creationIds, cap) {
      if ([...collections.values()].filter((c) => c.userId === ownerId).length >= cap) return null;
      writes.push('create');
      const now = new Date();
      const collection = { id: `col-${++next}`, userId: ownerId, ...input, createdAt: now, updatedAt: now };
      collections.set(collection.id, collection);
      items.set(
        collection.id,
        creationIds.filter((id) => canHold({ id: ownerId }, creations.get(id)!)),
      );
      return collection as never;
    },
    async update(id, patch) {
      writes.push('update');
      const collection = { ...collections.get(id)!, ...patch };
      collections.set(id, collection);
      return collection as never;
    },
    async delete(id) {
      writes.push('delete');
      collections.delete(id);
      items.delete(id);
    },
    async holdable(owner, ids) {
      return new Set(ids.filter((id) => creations.has(id) && canHold(owner, creations.get(id)!)));
    },
    async add(id, owner, creationIds, cap) {
      const held = items.get(id)!;
      const fresh = creationIds.filter((c) => !held.includes(c) && canHold(owner, creations.get(c)!));
      if (held.length + fresh.length > cap) return 'full';
      writes.push('add');
      held.push(...fresh);
      return fresh.length;
    },
    async remove(id, creationIds) {
      writes.push('remove');
      const held = items.get(id)!;
      items.set(
        id,
        held.filter((c) => !creationIds.includes(c)),
      );
      return held.length - items.get(id)!.length;
    },
    async shown(viewer, collection, window) {
      // Positions look like the real store's (item ids): here, the index in what the reader is shown.
      const position = (i: number) => `00000000-0000-7000-8000-${String(i).padStart(12, '0')}`;
      const ids = shownTo(viewer, collection);
      const from = window.after === null ? 0 : Number(window.after.slice(-12)) + 1;
      const page = ids.slice(from, from + window.take);
      return {
        items: page.map((id, i) => ({ position: position(from + i), creation: creations.get(id) as never })),
        more: from + window.take < ids.length,
      };
    },
    async summaries(viewer, list) {
      return new Map(list.map((c) => [c.id, { count: shownTo(viewer, c).length, coverId: shownTo(viewer, c)[0] ?? null }]));
    },
    async light(ownerId) {
      const mine = [...collections.values()].filter((c) => c.userId === ownerId).reverse();
      return {
        collections: mine.map((c) => ({ id: c.id, name: c.name, public: c.public, creationIds: shownTo({ id: ownerId }, c) })),
        more: false,
      };
    },
  };
  return { store, creations, items, writes, lookedUp };
}

const ada = { id: 'ada' };
const bob = { id: 'bob' };
const limits = { maxCreations: 4, maxPerUser: 3, pageMaxBytes: 1_000_000 };

function setup() {
  const memory = memoryStore();
  const add = (id: string, userId: string, isPublic = true, deleted = false) =>
    memory.creations.set(id, { id, userId, public: isPublic, deleted });
  add('ada-public', 'ada');
  add('ada-private', 'ada', false);
  add('bob-public', 'bob');
  add('bob-private', 'bob', false);
  add('bob-deleted', 'bob', true, true);
  return { ...memory, rules: collectionService(memory.store, limits) };
}

describe('collection rules', () => {
  it('a private collection is read by its owner only, and is "not found" for anyone else, as an unknown one is', async () => {
    const { rules } = setup();
    const secret = await rules.create(ada, { name: 'Secret', public: false });
    expect((await rules.get(ada, secret.id)).name).toBe('Secret');
    await expect(rules.get(bob, secret.id)).rejects.toMatchObject({ code: 'NOT_FOUND', message: 'Collection not found' });
    await expect(rules.get(bob, 'nothing')).rejects.toMatchObject({ code: 'NOT_FOUND', message: 'Collection not found' });
    const open = await rules.create(ada, { name: 'Open' });
    expect((await rules.get(bob, open.id)).public).toBe(true);
  });

  it('only the owner changes a collection: forbidden on a public one, not found on a private one, nothing written', async () => {
    const { rules, writes } = setup();
    const open = await rules.create(ada, { name: 'Open' });
    const secret = await rules.create(ada, { name: 'Secret', public: false });
    writes.length = 0;
    const changes = (id: string) => [
      rules.update(bob, id, { name: 'Mine' }),
      rules.delete(bob, id),
      rules.add(bob, id, { creationIds: ['bob-public'] }),
      rules.remove(bob, id, { creationIds: ['ada-public'] }),
    ];
    for (const change of changes(open.id)) await expect(change).rejects.toMatchObject({ code: 'FORBIDDEN' });
    for (const change of changes(secret.id)) await expect(change).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(writes).toEqual([]);
  });

  it('takes in only creations its owner may see, refusing the first other by its place; the same one twice counts once', async () => {
    const { rules, items, writes } = setup();
    for (const other of ['bob-private', 'bob-deleted', 'nothing']) {
      await expect(rules.create(ada, { name: 'Try', creationIds: ['ada-public', other] })).rejects.toMatchObject({
        code: 'BAD_USER_INPUT',
        fieldPath: ['creationIds', 1],
      });
    }
    expect(writes).toEqual([]);
    const made = await rules.create(ada, { name: 'Mine', creationIds: ['ada-private', 'bob-public', 'ada-private'] });
    expect(items.get(made.id)).toEqual(['ada-private', 'bob-public']);
    expect(await rules.add(ada, made.id, { creationIds: ['bob-public', 'ada-public', 'ada-public'] })).toBe(1);
    expect(items.get(made.id)).toEqual(['ada-private', 'bob-public', 'ada-public']);
  });

  it('holds at most maxCreations (per collection), a request names at most 100, a user owns at most maxPerUser', async () => {
    const { rules, creations, items } = setup();
    for (let i = 0; i < 6; i++) creations.set(`many-${i}`, { id: `many-${i}`, userId: 'ada', public: true, deleted: false });
    const made = await rules.create(ada, { name: 'Small', creationIds: ['many-0', 'many-1', 'many-2'] });
    await expect(rules.add(ada, made.id, { creationIds: ['many-3', 'many-4'] })).rejects.toMatchObject({
      code: 'BAD_USER_INPUT',
      fieldPath: ['creationIds'],
    });
    expect(items.get(made.id)).toHaveLength(3);
    expect(await rules.add(ada, made.id, { creationIds: ['many-3'] })).toBe(1);
    await expect(
      rules.create(ada, { name: 'Five', creationIds: ['many-0', 'many-1', 'many-2', 'many-3', 'many-4'] }),
    ).rejects.toMatchObject({
      code: 'BAD_USER_INPUT',
    });
    const hundredAndOne = Array.from({ length: 101 }, (_, i) => `x-${i}`);
    await expect(rules.add(ada, made.id, { creationIds: hundredAndOne })).rejects.toMatchObject({
      code: 'BAD_USER_INPUT',
      message: 'must name at most 100 creations',
    });
    await rules.create(ada, { name: 'Two' });
    await rules.create(ada, { name: 'Three' });
    await expect(rules.create(ada, { name: 'Four' })).rejects.toMatchObject({ code: 'UNPROCESSABLE' });
  });

  it("shows each reader what both they and the owner may see: a private creation only in its author's own collection, to its author", async () => {
    const { rules, creations } = setup();
    const adas = await rules.create(ada, { name: 'Ada', creationIds: ['ada-private', 'ada-public', 'bob-public'] });
    const bobs = await rules.create(bob, { name: 'Bob', creationIds: ['bob-private', 'ada-public'] });
    const view = async (viewer: { id: string }, id: string) => {
      const page = await rules.creations(viewer, await rules.get(viewer, id), {}, {});
      const summary = (await rules.summaries(viewer, [await rules.get(viewer, id)])).get(id)!;
      return { ids: page.creations.map((c) => (c as unknown as MemoryCreation).id), ...summary };
    };
    expect(await view(ada, adas.id)).toEqual({ ids: ['ada-private', 'ada-public', 'bob-public'], count: 3, coverId: 'ada-private' });
    expect(await view(bob, adas.id)).toEqual({ ids: ['ada-public', 'bob-public'], count: 2, coverId: 'ada-public' });
    expect(await view(ada, bobs.id)).toEqual({ ids: ['ada-public'], count: 1, coverId: 'ada-public' });
    expect(await view(bob, bobs.id)).toEqual({ ids: ['bob-private', 'ada-public'], count: 2, coverId: 'bob-private' });
    // Ada makes her creation private: Bob's collection shows it to no one, Ada included.
    creations.set('ada-public', { ...creations.get('ada-public')!, public: false });
    expect(await view(ada, bobs.id)).toEqual({ ids: [], count: 0, coverId: null });
    expect(await view(bob, bobs.id)).toEqual({ ids: ['bob-private'], count: 1, coverId: 'bob-private' });
  });

  it('pages go on from their cursor to the end; a cursor of another kind is refused; an id no row can have is not looked up', async () => {
    const { rules, creations, lookedUp } = setup();
    for (let i = 0; i < 4; i++) creations.set(`p-${i}`, { id: `p-${i}`, userId: 'ada', public: true, deleted: false });
    const made = await rules.create(ada, { name: 'Paged', creationIds: ['p-0', 'p-1', 'p-2', 'p-3'] });
    const seen: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await rules.creations(ada, made, { first: 3, after }, {});
      seen.push(...page.creations.map((c) => (c as unknown as MemoryCreation).id));
      if (!page.nextCursor) break;
      after = page.nextCursor;
    }
    expect(seen).toEqual(['p-0', 'p-1', 'p-2', 'p-3']);
    await expect(rules.creations(ada, made, { after: 'bm9wZQ' }, {})).rejects.toMatchObject({ code: 'BAD_USER_INPUT' });
    lookedUp.length = 0;
    await expect(rules.get(ada, 'nul\u0000id')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(lookedUp).toEqual([]);
  });

  it.each([
    ['an empty name', { name: '' }, 'name'],
    ['a name over 100 characters', { name: 'x'.repeat(101) }, 'name'],
    ['a description over 2000 characters', { description: 'x'.repeat(2001) }, 'description'],
    ['public that is no boolean', { public: 'yes' }, 'public'],
  ])('refuses %s naming the field, and a change with nothing in it; nothing is written', async (_label, patch, field) => {
    const { rules, writes } = setup();
    const made = await rules.create(ada, { name: 'Draft', description: 'First go' });
    writes.length = 0;
    await expect(rules.update(ada, made.id, patch)).rejects.toMatchObject({ code: 'BAD_USER_INPUT', fieldPath: [field] });
    await expect(rules.update(ada, made.id, { colour: 'blue' })).rejects.toMatchObject({
      code: 'BAD_USER_INPUT',
      message: 'No collection fields to update in the request',
    });
    expect(writes).toEqual([]);
    expect(await rules.get(ada, made.id)).toMatchObject({ name: 'Draft', description: 'First go' });
  });

  it('names at most 100 creations when a collection is made, as when creations are added', async () => {
    const { rules, writes } = setup();
    const hundredAndOne = Array.from({ length: 101 }, (_, i) => `x-${i}`);
    await expect(rules.create(ada, { name: 'Big', creationIds: hundredAndOne })).rejects.toMatchObject({
      code: 'BAD_USER_INPUT',
      message: 'must name at most 100 creations',
      fieldPath: ['creationIds'],
    });
    expect(writes).toEqual([]);
  });
});
