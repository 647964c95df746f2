import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Model } from '../generated/prisma/client.ts';
import type { Services } from '../domain/services.ts';
import type { RestErrorStyle } from '../http/errors.ts';

/** A private model of someone else is a 401 in the original. */
const errors: RestErrorStyle = { bodyKey: 'message', status: { FORBIDDEN: 401 } };
/** For the OpenAPI description. */
export { errors as modelErrors };

export const restModelSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    user: z.string().meta({ description: "The owner's id" }),
    base_model: z.string(),
    checkpoint: z.string().nullable(),
    thumbnail: z.string().nullable(),
    lora_trigger_text: z.string().nullable(),
    public: z.boolean(),
    args: z.unknown(),
    createdAt: z.date(),
  })
  .meta({ id: 'Model' });

export const toRestModel = (m: Model): z.input<typeof restModelSchema> => ({
  id: m.id,
  name: m.name,
  user: m.userId,
  base_model: m.baseModel,
  checkpoint: m.checkpoint,
  thumbnail: m.thumbnail,
  lora_trigger_text: m.loraTriggerText,
  public: m.public,
  args: m.args,
  createdAt: m.createdAt,
});

export function modelRoutes(app: FastifyInstance, services: Services) {
  app.get<{ Params: { modelId: string } }>('/v2/models/:modelId', { config: { errors } }, async (request) => ({
    model: toRestModel(await services.models.get(request.viewer, request.params.modelId)),
  }));
}
