import { z } from 'zod';
import { mannaNumber } from '../domain/core/manna.ts';
import { balanceOf } from '../domain/creators/index.ts';
import type { User } from '../generated/prisma/client.ts';
import { CreatorType } from '../domain/core/vocabulary.ts';
import { operation } from './operation.ts';

/**
 * The original's clients read tiers as numbers (its SDK's `SubscriptionTier` enum); parley keeps
 * the word. The spec fixes neither, so `subscriptionTier` is the number integrations compare and
 * `subscriptionTierName` the word (docs/compatibility.md).
 */
const tierNumbers = new Map([
  ['free', 0],
  ['basic', 1],
  ['pro', 2],
  ['believer', 3],
  ['admin', 4],
]);
export const subscriptionTierNumber = (tier: string) => tierNumbers.get(tier.toLowerCase()) ?? 0;

/**
 * A user or agent as the original populated references to them (`owner`, `user`, `sender`):
 * `_id` and `userId` are both parley's id, since parley has no separate sign-in provider id.
 */
export const restCreatorRefSchema = z
  .object({
    _id: z.string(),
    userId: z.string(),
    username: z.string(),
    userImage: z.string().nullable(),
    type: z.enum(CreatorType),
    createdAt: z.date(),
    updatedAt: z.date(),
  })
  .meta({ id: 'CreatorRef' });

export type CreatorRow = Pick<User, 'id' | 'username' | 'userImage' | 'type' | 'createdAt' | 'updatedAt'>;

export const toRestCreatorRef = (u: CreatorRow): z.input<typeof restCreatorRefSchema> => ({
  _id: u.id,
  userId: u.id,
  username: u.username,
  userImage: u.userImage,
  type: u.type,
  createdAt: u.createdAt,
  updatedAt: u.updatedAt,
});

/** Balances are exact decimals in the database; JSON numbers here, as the spec says. */
export const restProfileSchema = z
  .object({
    balance: z.number(),
    subscriptionBalance: z.number(),
    foreverBalance: z.number(),
    creator: restCreatorRefSchema.extend({
      id: z.string(),
      subscriptionTier: z.number().int().min(0).max(4).meta({ description: '0 free, 1 basic, 2 pro, 3 believer, 4 admin' }),
      subscriptionTierName: z.string(),
      featureFlags: z.array(z.string()),
    }),
  })
  .meta({ id: 'CreatorProfile' });

export const toRestProfile = (u: User): z.input<typeof restProfileSchema> => ({
  balance: mannaNumber(balanceOf(u)),
  subscriptionBalance: u.subscriptionBalance.toNumber(),
  foreverBalance: u.foreverBalance.toNumber(),
  creator: {
    ...toRestCreatorRef(u),
    id: u.id,
    subscriptionTier: subscriptionTierNumber(u.subscriptionTier),
    subscriptionTierName: u.subscriptionTier,
    featureFlags: u.featureFlags,
  },
});

export const creatorOperations = [
  operation({
    operationId: 'getMyProfile',
    method: 'get',
    path: '/v2/creators/me',
    tag: 'Creators',
    summary: 'Your creator profile and manna balances',
    ok: { json: restProfileSchema },
    handler: async (request, _reply, { services }) => toRestProfile(await services.creators.me(request.viewer)),
  }),
  operation({
    operationId: 'getCreator',
    method: 'get',
    path: '/v2/creators/:userId',
    tag: 'Creators',
    summary: "A creator's public profile (a user, or an agent you may see); balances only on /v2/creators/me",
    ok: { json: z.object({ creator: restCreatorRefSchema.extend({ id: z.string() }).meta({ id: 'CreatorPublicProfile' }) }) },
    errors: { style: { bodyKey: 'both' }, codes: ['NOT_FOUND'] },
    handler: async (request, _reply, { services }) => {
      const creator = await services.creators.get(request.viewer, request.params.userId);
      return { creator: { ...toRestCreatorRef(creator), id: creator.id } };
    },
  }),
];
