import { z } from 'zod';
import { conflict, notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import { type Manna, mannaFromText } from '../core/manna.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import type { CreatorFace, CreatorQuery, CreatorRead, CreatorStore, User } from './store.ts';

export const usernameSchema = z
  .string()
  .regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]{1,38}$/, 'must be 2 to 39 letters, digits, "_", "." or "-", not starting with "." or "-"');

/** `balance` is what the creator can spend: subscription manna plus purchased manna. */
export const balanceOf = (user: Pick<User, 'subscriptionBalance' | 'foreverBalance'>): Manna =>
  mannaFromText(user.subscriptionBalance.plus(user.foreverBalance).toString());

export function creatorService(store: CreatorStore) {
  return {
    /**
     * Any creator's profile by id. An agent's creator row is its public face: it is found only
     * when the agent may be read, so a private agent's key does not leak through it.
     */
    async get<Q extends CreatorQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<CreatorRead<Q>> {
      const user = canNameARow(id) ? await store.findVisible(viewer, id, query) : null;
      if (!user) throw notFound('Creator not found');
      return user;
    },

    /**
     * The public face (name, picture, kind) of the senders of messages the caller was shown
     * (REST populates `sender` with it). Reading a message already took its session's access.
     */
    async senders(ids: readonly string[]): Promise<CreatorFace[]> {
      const named = ids.filter(canNameARow);
      if (!named.length) return [];
      return store.faces([...new Set(named)]);
    },

    async me<Q extends CreatorQuery = object>(viewer: Viewer, query?: Q): Promise<CreatorRead<Q>> {
      const user = await store.find(viewer.id, query);
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
      const taken = await store.sameName(name);
      if (taken?.type === 'agent') throw conflict(`"${taken.username}" is an agent's key, not a user: API keys are made for users only`);
      if (taken && taken.username !== name)
        throw conflict(`The username "${taken.username}" already exists (usernames are the same regardless of case)`);
      const user = await store.ensureUser(name);
      if (user === 'taken') throw conflict(`The username "${name}" was taken meanwhile`);
      return user;
    },
  };
}

export type CreatorService = ReturnType<typeof creatorService>;
