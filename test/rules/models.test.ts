import { describe, expect, it } from 'vitest';
import { MODEL_NOT_FOUND, modelService } from '../../src/domain/models/service.ts';
import { Catalog, memoryModelStore } from './support/catalog.ts';

/**
 * The models' rules over a store in memory: who reads and changes a model (a stranger never
 * learns a private one exists), what a change may hold, and the numbered page's input.
 */
function world() {
  const c = new Catalog();
  const models = modelService(memoryModelStore(c), { listPageMaxBytes: 1_000_000 });
  return { c, models, owner: c.user('owner'), stranger: c.user('stranger') };
}

const refusal = (code: string, message: string, fieldPath?: (string | number)[]) => expect.objectContaining({ code, message, fieldPath });

describe('models', () => {
  it('shows a public model to anyone and a private one to its owner only', async () => {
    const { c, models, owner, stranger } = world();
    const hidden = c.model(owner);
    const shown = c.model(owner, { public: true });
    expect(await models.get(stranger, shown.id)).toMatchObject({ id: shown.id });
    expect(await models.get(owner, hidden.id)).toMatchObject({ id: hidden.id });
    await expect(models.get(stranger, hidden.id)).rejects.toEqual(refusal('FORBIDDEN', 'You do not have access to this model'));
    await expect(models.get(owner, 'no-such-model')).rejects.toEqual(refusal('NOT_FOUND', MODEL_NOT_FOUND));
  });

  it('lets only the owner rename or publish it: a private one is not found by a stranger, a public one is not theirs', async () => {
    const { c, models, owner, stranger } = world();
    const hidden = c.model(owner);
    const shown = c.model(owner, { public: true });
    await expect(models.update(stranger, hidden.id, { name: 'x' })).rejects.toEqual(refusal('NOT_FOUND', MODEL_NOT_FOUND));
    await expect(models.update(stranger, shown.id, { name: 'x' })).rejects.toEqual(
      refusal('FORBIDDEN', 'Only the owner of this model can change it'),
    );
    expect(c.writes).toEqual([]);
    expect(await models.update(owner, hidden.id, { name: ' Renamed ', public: true })).toMatchObject({ name: 'Renamed', public: true });
  });

  it('refuses a change that is empty, malformed or a deletion, before reading the model', async () => {
    const { c, models, owner } = world();
    const model = c.model(owner);
    await expect(models.update(owner, model.id, {})).rejects.toEqual(refusal('BAD_USER_INPUT', 'No model fields to update in the request'));
    await expect(models.update(owner, model.id, { public: 'yes' })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'must be true or false', ['public']),
    );
    await expect(models.update(owner, model.id, { deleted: true })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'models are not deleted through the API', ['deleted']),
    );
    // A deletion refused is refused even with another change beside it, and for someone else's model too.
    await expect(models.update(owner, 'no-such-model', { name: 'x', deleted: true })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'models are not deleted through the API', ['deleted']),
    );
    expect(c.writes).toEqual([]);
  });

  it('pages the models the viewer may use, their own and public ones, with how many there are', async () => {
    const { c, models, owner, stranger } = world();
    const own = c.model(owner);
    c.clock.advance(1000);
    c.model(stranger);
    c.clock.advance(1000);
    const shared = c.model(stranger, { public: true });
    const page = await models.page(owner, { page: '1', limit: '1' });
    expect(page).toMatchObject({ total: 2, page: 1, limit: 1 });
    expect(page.models.map((m) => m.id)).toEqual([shared.id]);
    expect((await models.page(owner, { page: 2, limit: 1 })).models.map((m) => m.id)).toEqual([own.id]);
    expect((await models.page(owner, { modelId: own.id })).models.map((m) => m.id)).toEqual([own.id]);
  });

  it('names the page input at fault', async () => {
    const { models, owner } = world();
    await expect(models.page(owner, { limit: 101 })).rejects.toEqual(refusal('BAD_USER_INPUT', 'must be at most 100', ['limit']));
    await expect(models.page(owner, { page: 0 })).rejects.toEqual(refusal('BAD_USER_INPUT', 'must be at least 1', ['page']));
    await expect(models.page(owner, { public: 'maybe' })).rejects.toEqual(refusal('BAD_USER_INPUT', 'must be true or false', ['public']));
  });
});
