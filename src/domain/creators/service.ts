import { z } from 'zod';
import type { Db } from '../../db/database.ts';
import type { User } from '../../generated/prisma/client.ts';
import { notFound } from '../errors.ts';
import { parseInput } from '../validation.ts';
import type { Viewer } from '../viewer.ts';

export const usernameSchema = z
  .string()
  .regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]{1,38}$/, 'must be 2 to 39 letters, digits, "_", "." or "-", not starting with "." or "-"');

/** `balance` is what the creator can spend: subscription manna plus purchased manna. */
export const balanceOf = (user: Pick<User, 'subscriptionBalance' | 'foreverBalance'>) => user.subscriptionBalance.plus(user.foreverBalance);

export function creatorService(db: Db) {
  return {
    async me(viewer: Viewer, query: { include?: object } = {}): Promise<User> {
      const user = await db.user.findUnique({ where: { id: viewer.id }, ...query });
      if (!user) throw notFound('Creator not found');
      return user;
    },

    /** For the CLI: the user with this name, created if missing. */
    async ensureUser(username: string): Promise<User> {
      const name = parseInput(usernameSchema, username);
      return db.user.upsert({ where: { username: name }, create: { username: name }, update: {} });
    },
  };
}

export type CreatorService = ReturnType<typeof creatorService>;
