import type { Db } from '../../db/database.ts';
import { Prisma, type CreatorType, type User } from '../../generated/prisma/client.ts';
import { isUniqueViolation } from '../core/stores/prisma-errors.ts';
import type { Viewer } from '../core/viewer.ts';
import { visibleToFilter } from '../discovery/store.ts';

export type { User };

/** The relations a reader wants with a creator (GraphQL's selection), passed through to the read. */
export type CreatorQuery = { include?: Prisma.UserInclude };
/** A creator as read with `Q`: its columns and the relations `Q` includes. */
export type CreatorRead<Q extends CreatorQuery> = User & Prisma.UserGetPayload<Q>;
/** What anyone may see of a creator: name, picture, kind. */
export type CreatorFace = Pick<User, 'id' | 'username' | 'userImage' | 'type' | 'createdAt' | 'updatedAt'>;

/** Where creators (users, and agents' public faces) are kept. */
export interface CreatorStore {
  /** A user, or an agent's creator row when the agent is visible to the viewer. */
  findVisible<Q extends CreatorQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<CreatorRead<Q> | null>;
  find<Q extends CreatorQuery = object>(id: string, query?: Q): Promise<CreatorRead<Q> | null>;
  faces(ids: readonly string[]): Promise<CreatorFace[]>;
  /** The creator whose name equals `name` once case and Unicode forms are set aside. */
  sameName(name: string): Promise<Pick<User, 'id' | 'username' | 'type'> | null>;
  /** The user named exactly `name`, created if missing; 'taken' when a write of the same name won meanwhile. */
  ensureUser(name: string): Promise<User | 'taken'>;
}

type Tx = Prisma.TransactionClient;

/**
 * Adds a creator row inside the caller's transaction: an agent's public face (with the agent
 * row made beside it) or a person met on a chat platform (with the deployment's sender row).
 * A name already taken is the database's unique violation, which rolls the caller's work back.
 */
export const addCreator = (tx: Tx, creator: { type?: CreatorType; username: string; userImage?: string | null }) =>
  tx.user.create({ data: { type: creator.type, username: creator.username, userImage: creator.userImage }, select: { id: true } });

/** Renames a creator or changes its picture, inside the caller's transaction; fields left undefined stay. */
export const renameCreator = (tx: Tx, id: string, face: { username?: string; userImage?: string | null }) =>
  tx.user.update({ where: { id }, data: { username: face.username, userImage: face.userImage }, select: { id: true } });

/** The form in which usernames are unique (the database's unique index is on this expression). */
const normalizedUsername = (value: Prisma.Sql) => Prisma.sql`lower(normalize(${value}, NFKC))`;

export function creatorStore(db: Db): CreatorStore {
  return {
    async findVisible<Q extends CreatorQuery>(viewer: Viewer, id: string, query?: Q) {
      return (await db.user.findFirst({
        where: { id, OR: [{ type: 'user' }, { agentProfile: visibleToFilter(viewer, 'ownerId') }] },
        ...query,
      })) as CreatorRead<Q> | null;
    },

    async find<Q extends CreatorQuery>(id: string, query?: Q) {
      return (await db.user.findUnique({ where: { id }, ...query })) as CreatorRead<Q> | null;
    },

    faces: (ids) =>
      db.user.findMany({
        where: { id: { in: [...ids] } },
        select: { id: true, username: true, userImage: true, type: true, createdAt: true, updatedAt: true },
      }),

    async sameName(name) {
      const [found] = await db.$queryRaw<Pick<User, 'id' | 'username' | 'type'>[]>`
        SELECT "id", "username", "type" FROM "User" WHERE ${normalizedUsername(Prisma.sql`"username"`)} = ${normalizedUsername(Prisma.sql`${name}`)}`;
      return found ?? null;
    },

    async ensureUser(name) {
      try {
        return await db.user.upsert({ where: { username: name }, create: { username: name }, update: {} });
      } catch (e) {
        if (isUniqueViolation(e)) return 'taken';
        throw e;
      }
    },
  };
}
