import { z } from 'zod';
import { modelPatchSchema } from '../domain/models/index.ts';
import { paginate } from '../domain/core/page.ts';
import type { Model, User } from '../generated/prisma/client.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { restCreatorRefSchema, toRestCreatorRef } from './creators.ts';
import { restSearchPageSchema } from './creations.ts';
import { operation } from './operation.ts';

/** A private model of someone else is a 401 in the original. */
const errors: RestErrorStyle = { bodyKey: 'message', status: { FORBIDDEN: 401 } };

/**
 * The training task as the original's clients read it (`model.task`). parley keeps no task rows
 * for trainings, so this is derived from the model: its id, owner, arguments and dates, and a
 * finished status (a model that is served was trained).
 */
const restTrainingTaskSchema = z
  .object({
    _id: z.string().meta({ description: "The model's id: parley keeps no separate training task" }),
    user: restCreatorRefSchema,
    tool: z.literal('lora_training'),
    output_type: z.literal('lora'),
    args: z.unknown(),
    status: z.literal('completed'),
    error: z.null(),
    result: z.array(z.unknown()),
    createdAt: z.date(),
    updatedAt: z.date(),
  })
  .meta({ id: 'ModelTrainingTask' });

export const restModelSchema = z
  .object({
    _id: z.string().meta({ description: 'The same as id, as the original named it' }),
    id: z.string(),
    name: z.string(),
    slug: z.string().meta({ description: '<owner username>/<name in lowercase, words joined by "-">' }),
    user: restCreatorRefSchema,
    userId: z.string().meta({ description: "The owner's id" }),
    task: restTrainingTaskSchema,
    base_model: z.string(),
    checkpoint: z.string().nullable(),
    thumbnail: z.string().nullable(),
    lora_trigger_text: z.string().nullable(),
    public: z.boolean(),
    deleted: z.literal(false).meta({ description: 'Always false: parley removes a deleted model' }),
    args: z.unknown(),
    createdAt: z.date(),
    updatedAt: z.date(),
  })
  .meta({ id: 'Model' });

/** A model read with its owner's row, which REST shows populated. */
export type RestModelRow = Model & { user: User };
export const restModelQuery = { include: { user: true } } as const;

const slugPart = (name: string) =>
  name
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, '-')
    .replace(/^-+|-+$/g, '');

export const toRestModel = (m: RestModelRow): z.input<typeof restModelSchema> => {
  const user = toRestCreatorRef(m.user);
  return {
    _id: m.id,
    id: m.id,
    name: m.name,
    slug: `${m.user.username}/${slugPart(m.name) || m.id}`,
    user,
    userId: m.userId,
    task: {
      _id: m.id,
      user,
      tool: 'lora_training',
      output_type: 'lora',
      args: m.args,
      status: 'completed',
      error: null,
      result: [],
      createdAt: m.createdAt,
      updatedAt: m.updatedAt,
    },
    base_model: m.baseModel,
    checkpoint: m.checkpoint,
    thumbnail: m.thumbnail,
    lora_trigger_text: m.loraTriggerText,
    public: m.public,
    deleted: false,
    args: m.args,
    createdAt: m.createdAt,
    updatedAt: m.updatedAt,
  };
};

export const modelOperations = [
  operation({
    operationId: 'getModel',
    method: 'get',
    path: '/v2/models/:modelId',
    tag: 'Models',
    summary: 'A model (LoRA) of yours, or a public one',
    ok: { json: z.object({ model: restModelSchema }) },
    errors: { style: errors, codes: ['FORBIDDEN', 'NOT_FOUND'] },
    handler: async (request, _reply, { services }) => ({
      model: toRestModel((await services.models.get(request.viewer, request.params.modelId, restModelQuery)) as RestModelRow),
    }),
  }),
  operation({
    operationId: 'listModels',
    method: 'get',
    path: '/v2/models',
    tag: 'Models',
    summary:
      'A numbered page of the models you may use (yours and public ones), newest first; it stops before LIST_PAGE_MAX_BYTES (the next page goes on from there)',
    query: z.object({
      page: z.string().optional().meta({ description: 'From 1' }),
      limit: z.string().optional().meta({ description: '25 unless told, at most 100' }),
      userId: z.string().optional().meta({ description: "Only this creator's models" }),
      modelId: z
        .union([z.string(), z.array(z.string())])
        .optional()
        .meta({ description: 'Only these models (repeat it for several)' }),
      public: z.enum(['true', 'false']).optional().meta({ description: 'true: public ones only; false: your private ones only' }),
    }),
    ok: { json: restSearchPageSchema.extend({ docs: z.array(restModelSchema) }) },
    errors: { style: errors, codes: ['BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const { models, total, page, limit, cut } = await services.models.page(request.viewer, request.query, restModelQuery);
      return paginate((models as RestModelRow[]).map(toRestModel), total, page, limit, cut);
    },
  }),
  operation({
    operationId: 'updateModel',
    method: 'patch',
    path: '/v2/models/:modelId',
    tag: 'Models',
    summary: 'Rename a model of yours, or make it public or private',
    body: modelPatchSchema,
    ok: { json: z.object({ model: restModelSchema }) },
    errors: { style: errors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => ({
      model: toRestModel(
        (await services.models.update(request.viewer, request.params.modelId, request.body ?? {}, restModelQuery)) as RestModelRow,
      ),
    }),
  }),
];
