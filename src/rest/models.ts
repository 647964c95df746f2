import type { FastifyInstance } from 'fastify';
import type { Model } from '../generated/prisma/client.ts';
import type { Services } from '../domain/services.ts';
import type { RestErrorStyle } from './errors.ts';

/** A private model of someone else is a 401 in the original. */
const errors: RestErrorStyle = { bodyKey: 'message', status: { FORBIDDEN: 401 } };

export const toRestModel = (m: Model) => ({
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
