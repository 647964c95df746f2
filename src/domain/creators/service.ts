import { z } from 'zod';
import type { Db } from '../../db/database.ts';
import { Prisma, type User } from '../../generated/prisma/client.ts';
import { conflict, notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import { isUniqueViolation } from '../core/stores/prisma-errors.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { visibleToFilter } from '../core/visibility.ts';

export const usernameSchema = z
  .string()
  .regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]{1,38}$/, 'must be 2 to 39 letters, digits, "_", "." or "-", not starting with "." or "-"');

/** The form in which usernames are unique (the database's unique index is on this expression). */
const normalizedUsername = (value: Prisma.Sql) => Prisma.sql`lower(normalize(${value}, NFKC))`;

/** `balance` is what the creator can spend: subscription manna plus purchased manna. */
export const balanceOf = (user: Pick<User, 'subscriptionBalance' | 'foreverBalance'>) => user.subscriptionBalance.plus(user.foreverBalance);

export function creatorService(db: Db) {
  return {
    /**
     * Any creator's profile by id. An agent's creator row is its public face: it is found only
     * when the agent may be read, so a private agent's key does not leak through it.
     */
    async get(viewer: Viewer, id: string, query: { include?: object } = {}): Promise<User> {
      const user = canNameARow(id)
        ? await db.user.findFirst({ where: { id, OR: [{ type: 'user' }, { agentProfile: visibleToFilter(viewer, 'ownerId') }] }, ...query })
        : null;
      if (!user) throw notFound('Creator not found');
      return user;
    },

    /**
     * The public face (name, picture, kind) of the senders of messages the caller was shown
     * (REST populates `sender` with it). Reading a message already took its session's access.
     */
    async senders(ids: readonly string[]): Promise<Pick<User, 'id' | 'username' | 'userImage' | 'type' | 'createdAt' | 'updatedAt'>[]> {
      const named = ids.filter(canNameARow);
      if (!named.length) return [];
      return db.user.findMany({
        where: { id: { in: [...new Set(named)] } },
        select: { id: true, username: true, userImage: true, type: true, createdAt: true, updatedAt: true },
      });
    },

    async me(viewer: Viewer, query: { include?: object } = {}): Promise<User> {
      const user = await db.user.findUnique({ where: { id: viewer.id }, ...query });
      if (!user) throw notFound('Creator not found');
      return user;
    },

    /**
     * For the CLI: the user with this name, created if missing. A name that is taken after
     * normalization (another case, an agent's key) is refused: a key minted for it would act
     * as someone else.
     */
    async ensureUser(username: string): Promise<User> {
      const name = parseInput(usernameSchema, username);
      const [taken] = await db.$queryRaw<Pick<User, 'id' | 'username' | 'type'>[]>`
        SELECT "id", "username", "type" FROM "User" WHERE ${normalizedUsername(Prisma.sql`"username"`)} = ${normalizedUsername(Prisma.sql`${name}`)}`;
      if (taken?.type === 'agent') throw conflict(`"${taken.username}" is an agent's key, not a user: API keys are made for users only`);
      if (taken && taken.username !== name)
        throw conflict(`The username "${taken.username}" already exists (usernames are the same regardless of case)`);
      try {
        return await db.user.upsert({ where: { username: name }, create: { username: name }, update: {} });
      } catch (e) {
        if (isUniqueViolation(e)) throw conflict(`The username "${name}" was taken meanwhile`);
        throw e;
      }
    },
  };
}

export type CreatorService = ReturnType<typeof creatorService>;
