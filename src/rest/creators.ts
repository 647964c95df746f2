import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { CreatorType } from '../generated/prisma/enums.ts';
import { balanceOf } from '../domain/creators/service.ts';
import type { Services } from '../domain/services.ts';
import type { User } from '../generated/prisma/client.ts';

/** Balances are exact decimals in the database; JSON numbers here, as the spec says. */
export const restProfileSchema = z
  .object({
    balance: z.number(),
    subscriptionBalance: z.number(),
    foreverBalance: z.number(),
    creator: z.object({
      id: z.string(),
      username: z.string(),
      userImage: z.string().nullable(),
      type: z.enum(CreatorType),
      subscriptionTier: z.string(),
      featureFlags: z.array(z.string()),
      createdAt: z.date(),
    }),
  })
  .meta({ id: 'CreatorProfile' });

export const toRestProfile = (u: User): z.input<typeof restProfileSchema> => ({
  balance: balanceOf(u).toNumber(),
  subscriptionBalance: u.subscriptionBalance.toNumber(),
  foreverBalance: u.foreverBalance.toNumber(),
  creator: {
    id: u.id,
    username: u.username,
    userImage: u.userImage,
    type: u.type,
    subscriptionTier: u.subscriptionTier,
    featureFlags: u.featureFlags,
    createdAt: u.createdAt,
  },
});

export function creatorRoutes(app: FastifyInstance, services: Services) {
  app.get('/v2/creators/me', async (request) => toRestProfile(await services.creators.me(request.viewer)));
}
