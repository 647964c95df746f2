import { describe, expect, it } from 'vitest';
import { conceptService } from '../../src/domain/concepts/service.ts';
import type { ConceptStore, ConceptWithImages } from '../../src/domain/concepts/store.ts';

/**
 * The concept rules (who may read, who may change, which agent a concept may belong to) over a
 * store kept in memory: the rules decide from what the store answers, with no database.
 */
function memoryStore() {
  const concepts = new Map<string, ConceptWithImages>();
  const agentOwners = new Map([
    ['ada-agent', 'ada'],
    ['bob-agent', 'bob'],
  ]);
  const reads: string[] = [];
  const images = (list: { image: string; usageInstructions: string }[], conceptId: string) =>
    list.map((img, position) => ({ id: `${conceptId}-${position}`, conceptId, position, ...img }));
  const store: ConceptStore = {
    async find(id) {
      reads.push(id);
      return concepts.get(id) ?? null;
    },
    async ownerOf(id) {
      reads.push(id);
      return concepts.get(id)?.userId ?? null;
    },
    async agentOwnerOf(agentId) {
      return agentOwners.get(agentId) ?? null;
    },
    async create(ownerId, input) {
      const id = `concept-${concepts.size + 1}`;
      const now = new Date();
      const concept: ConceptWithImages = {
        id,
        userId: ownerId,
        agentId: input.agent ?? null,
        name: input.name,
        usageInstructions: input.usageInstructions ?? '',
        public: false,
        createdAt: now,
        updatedAt: now,
        images: images(input.images, id),
      };
      concepts.set(id, concept);
      return concept;
    },
    async update(id, patch) {
      const old = concepts.get(id)!;
      const concept: ConceptWithImages = {
        ...old,
        name: patch.name ?? old.name,
        usageInstructions: patch.usageInstructions ?? old.usageInstructions,
        agentId: patch.agent === undefined ? old.agentId : patch.agent,
        images: patch.images ? images(patch.images, id) : old.images,
      };
      concepts.set(id, concept);
      return concept;
    },
  };
  return { store, concepts, reads };
}

const ada = { id: 'ada' };
const bob = { id: 'bob' };
const image = { image: 'https://cdn.example.com/a.png' };

describe('concept rules', () => {
  it('a private concept is read by its owner only; a public one by anyone', async () => {
    const { store, concepts } = memoryStore();
    const rules = conceptService(store);
    const mine = await rules.create(ada, { name: 'Lighthouse', images: [image] });
    expect(mine).toMatchObject({ userId: 'ada', agentId: null, usageInstructions: '' });
    expect((await rules.get(ada, mine.id)).name).toBe('Lighthouse');
    await expect(rules.get(bob, mine.id)).rejects.toMatchObject({ code: 'FORBIDDEN' });
    concepts.set(mine.id, { ...concepts.get(mine.id)!, public: true });
    expect((await rules.get(bob, mine.id)).name).toBe('Lighthouse');
  });

  it('an unknown id is not found, and an id no row can have is not looked up', async () => {
    const { store, reads } = memoryStore();
    const rules = conceptService(store);
    await expect(rules.get(ada, 'nope')).rejects.toMatchObject({ code: 'NOT_FOUND', message: 'Concept not found' });
    await expect(rules.update(ada, 'no\u0000pe', { name: 'x' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(reads).toEqual(['nope']);
  });

  it('only the owner changes a concept, and only the fields sent', async () => {
    const { store, concepts } = memoryStore();
    const rules = conceptService(store);
    const { id } = await rules.create(ada, { name: 'Lighthouse', usageInstructions: 'at dusk', images: [image] });
    await expect(rules.update(bob, id, { name: 'Mine now' })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    await expect(rules.update(ada, id, {})).rejects.toMatchObject({ code: 'BAD_USER_INPUT' });
    expect(concepts.get(id)!.name).toBe('Lighthouse');
    const renamed = await rules.update(ada, id, { name: 'Beacon' });
    expect(renamed).toMatchObject({ name: 'Beacon', usageInstructions: 'at dusk', images: [{ position: 0, ...image }] });
  });

  it("a concept belongs to one of its owner's agents or none, never to someone else's", async () => {
    const { store, concepts } = memoryStore();
    const rules = conceptService(store);
    for (const agent of ['bob-agent', 'no-such-agent']) {
      await expect(rules.create(ada, { name: 'x', agent, images: [image] })).rejects.toMatchObject({
        code: 'BAD_USER_INPUT',
        fieldPath: ['agent'],
      });
    }
    expect(concepts.size).toBe(0);
    const { id } = await rules.create(ada, { name: 'x', agent: 'ada-agent', images: [image] });
    await expect(rules.update(ada, id, { agent: 'bob-agent' })).rejects.toMatchObject({ fieldPath: ['agent'] });
    expect(concepts.get(id)!.agentId).toBe('ada-agent');
    expect((await rules.update(ada, id, { agent: null })).agentId).toBeNull();
  });
});

const imageList = (n: number) => Array.from({ length: n }, (_, i) => ({ image: `https://cdn.example.com/${i}.png` }));

describe('what a concept’s fields may be', () => {
  it('takes one to 25 images, in order, each with usage instructions defaulting to ""', async () => {
    const { store, concepts } = memoryStore();
    const rules = conceptService(store);
    const made = await rules.create(ada, { name: 'Full set', images: imageList(25) });
    expect(made.images.map((i) => [i.position, i.image, i.usageInstructions])).toEqual(
      imageList(25).map((i, position) => [position, i.image, '']),
    );
    for (const images of [imageList(26), []])
      await expect(rules.create(ada, { name: 'x', images })).rejects.toMatchObject({ code: 'BAD_USER_INPUT', fieldPath: ['images'] });
    expect(concepts.size).toBe(1);
  });

  it.each([
    [['images'], { images: [] }],
    [['images'], { images: imageList(26) }],
    [['images'], { images: 'https://example.com/a.jpg' }],
    [['images'], { images: null }],
    [['images', 0, 'image'], { images: [{ image: 'not a url' }] }],
    [['images', 0, 'image'], { images: [{ usageInstructions: 'no image' }] }],
    [['images', 1, 'image'], { images: [{ image: 'https://example.com/ok.jpg' }, { image: 42 }] }],
    [['images', 0, 'usageInstructions'], { images: [{ image: 'https://example.com/ok.jpg', usageInstructions: 'x'.repeat(2001) }] }],
    [['name'], { name: '' }],
    [['name'], { name: '  ' }],
    [['name'], { name: 'x'.repeat(101) }],
    [['name'], { name: 5 }],
    [['usageInstructions'], { usageInstructions: 'x'.repeat(5001) }],
    [['usageInstructions'], { usageInstructions: false }],
    [['agent'], { agent: 5 }],
  ])('refuses a bad %j naming it, the valid field beside it not applied either', async (fieldPath, bad) => {
    const { store, concepts } = memoryStore();
    const rules = conceptService(store);
    const { id } = await rules.create(ada, { name: 'Lighthouse', usageInstructions: 'at dusk', images: [image] });
    const beside = fieldPath[0] === 'name' ? { usageInstructions: 'SHOULD NOT APPLY' } : { name: 'SHOULD NOT APPLY' };
    await expect(rules.update(ada, id, { ...beside, ...bad })).rejects.toMatchObject({ code: 'BAD_USER_INPUT', fieldPath });
    expect(concepts.get(id)).toMatchObject({ name: 'Lighthouse', usageInstructions: 'at dusk' });
  });

  it('replaces the image list when one is sent, in the order given', async () => {
    const { store } = memoryStore();
    const rules = conceptService(store);
    const { id } = await rules.create(ada, { name: 'Lighthouse', images: imageList(3) });
    const images = [{ image: 'https://example.com/3.jpg', usageInstructions: 'third' }, { image: 'https://example.com/1.jpg' }];
    expect((await rules.update(ada, id, { images })).images.map((i) => [i.position, i.image, i.usageInstructions])).toEqual([
      [0, 'https://example.com/3.jpg', 'third'],
      [1, 'https://example.com/1.jpg', ''],
    ]);
  });

  it('refuses a public concept’s change by anyone but its owner, changing nothing', async () => {
    const { store, concepts } = memoryStore();
    const rules = conceptService(store);
    const { id } = await rules.create(ada, { name: 'Lighthouse', images: [image] });
    concepts.set(id, { ...concepts.get(id)!, public: true });
    await expect(rules.update(bob, id, { name: 'Hijacked', images: [{ image: 'https://evil.example.com/x.jpg' }] })).rejects.toMatchObject({
      code: 'FORBIDDEN',
    });
    expect(concepts.get(id)).toMatchObject({ name: 'Lighthouse', images: [{ image: image.image }] });
  });
});
