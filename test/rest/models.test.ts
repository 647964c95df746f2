import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { expectError, expectRejectsBadKeys, isoDate, creatorRef } from '../helpers/rest-helpers.ts';
import { setUp } from '../helpers/set-up.ts';

describe('GET /v2/models/{id}', () => {
  let t: TestApp;
  let f: ReturnType<typeof fixtures>;
  let alice: TestUser;
  let bob: TestUser;

  setUp(async (start) => {
    t = await start.app();
    f = fixtures(t);
    alice = await t.createUser('alice');
    bob = await t.createUser('bob');
  });

  const fullModel = (owner: TestUser, isPublic: boolean) =>
    t.db.model.create({
      data: {
        userId: owner.id,
        name: 'Lighthouse LoRA',
        baseModel: 'flux-dev',
        checkpoint: 'https://cdn.example.com/lighthouse.safetensors',
        thumbnail: 'https://cdn.example.com/lighthouse.jpg',
        loraTriggerText: 'LHTOK',
        public: isPublic,
        args: { steps: 1000, rank: 16, images: ['a.jpg', 'b.jpg'] },
      },
    });

  /** The training task the original's clients read, derived from the model. */
  const task = (id: string, user: TestUser, args: unknown) => ({
    _id: id,
    user: creatorRef(user),
    tool: 'lora_training',
    output_type: 'lora',
    args,
    status: 'completed',
    error: null,
    result: [],
    createdAt: isoDate,
    updatedAt: isoDate,
  });

  it('answers 401 {error} for missing, malformed and unknown keys', async () => {
    const model = await f.model(alice, { public: true });
    expect(await expectRejectsBadKeys(t, 'GET', `/v2/models/${model.id}`)).toBe(true);
  });

  it("returns another user's public model with every field", async () => {
    const model = await fullModel(alice, true);
    const res = await t.rest('GET', `/v2/models/${model.id}`, { key: bob.apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      model: {
        _id: model.id,
        id: model.id,
        name: 'Lighthouse LoRA',
        slug: 'alice/lighthouse-lora',
        user: creatorRef(alice),
        userId: alice.id,
        task: task(model.id, alice, { steps: 1000, rank: 16, images: ['a.jpg', 'b.jpg'] }),
        base_model: 'flux-dev',
        checkpoint: 'https://cdn.example.com/lighthouse.safetensors',
        thumbnail: 'https://cdn.example.com/lighthouse.jpg',
        lora_trigger_text: 'LHTOK',
        public: true,
        deleted: false,
        args: { steps: 1000, rank: 16, images: ['a.jpg', 'b.jpg'] },
        createdAt: isoDate,
        updatedAt: isoDate,
      },
    });
    expect(new Date(res.body.model.createdAt).getTime()).toBe(model.createdAt.getTime());
  });

  it('returns null for unset optional fields', async () => {
    const model = await f.model(alice, { public: true, name: 'Bare' });
    const res = await t.rest('GET', `/v2/models/${model.id}`, { key: alice.apiKey });
    expect(res.status).toBe(200);
    expect(res.body.model).toEqual({
      _id: model.id,
      id: model.id,
      name: 'Bare',
      slug: 'alice/bare',
      user: creatorRef(alice),
      userId: alice.id,
      task: task(model.id, alice, {}),
      base_model: 'flux-dev',
      checkpoint: null,
      thumbnail: null,
      lora_trigger_text: 'tok',
      public: true,
      deleted: false,
      args: {},
      createdAt: isoDate,
      updatedAt: isoDate,
    });
  });

  it("refuses another user's private model with 401 {message}", async () => {
    const model = await fullModel(alice, false);
    const res = await t.rest('GET', `/v2/models/${model.id}`, { key: bob.apiKey });
    expectError(res, 401, 'message');
    expect(res.body.message).not.toContain('Lighthouse');
  });

  it.each([['nope'], ['5f1e2d3c4b5a697887766554'], ['01890a5d-ac96-774b-bcce-b302099a8057'], ['a%00b']])(
    'answers 404 {message:"Model not found"} for unknown id %s',
    async (id) => {
      expectError(await t.rest('GET', `/v2/models/${id}`, { key: alice.apiKey }), 404, 'message', 'Model not found');
    },
  );
});
