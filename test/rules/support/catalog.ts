import type { AgentStore, AgentWithKey } from '../../../src/domain/agents/store.ts';
import { numberedCut } from '../../../src/domain/core/byte-pages.ts';
import type { AgentPatch } from '../../../src/domain/agents/inputs.ts';
import type { CreationPatch, CreationStore } from '../../../src/domain/creations/store.ts';
import type { Viewer } from '../../../src/domain/core/viewer.ts';
import type { ModelStore } from '../../../src/domain/models/store.ts';
import { ids, TestClock } from './clock.ts';

/**
 * Agents, models and creations kept in maps, with what their Prisma stores hold in SQL: an
 * owner's cap counted and the row written together, a key unique among users and agents (case
 * aside), a like and its count changed together, a deleted creation seen by no one. Each
 * operation finishes without awaiting once it starts changing state, as indivisible as a transaction.
 */
export interface MemAgent {
  id: string;
  ownerId: string;
  name: string;
  key: string;
  public: boolean;
  persona: string;
  isPersonaPublic: boolean;
  llmSettings: Record<string, unknown>;
  tools: Record<string, boolean>;
  toolApproval: Record<string, unknown>;
  models: { lora: string; useWhen: string }[];
  createdAt: Date;
}
export interface MemModel {
  id: string;
  userId: string;
  name: string;
  public: boolean;
  createdAt: Date;
}
export interface MemCreation {
  id: string;
  userId: string;
  name: string;
  public: boolean;
  deleted: boolean;
  likeCount: number;
  createdAt: Date;
}

export class Catalog {
  readonly clock = new TestClock();
  readonly usernames = new Map<string, string>();
  readonly agents = new Map<string, MemAgent>();
  readonly models = new Map<string, MemModel>();
  readonly creations = new Map<string, MemCreation>();
  /** The names of each user's MCP servers (their ids are never anyone's here). */
  readonly mcpServerNames = new Map<string, string[]>();
  /** `creationId userId` of each like. */
  readonly likes = new Set<string>();
  /** Every write the stores made, in order: a refused request adds none. */
  readonly writes: string[] = [];
  readonly #agentId = ids('agent');
  readonly #modelId = ids('model');
  readonly #creationId = ids('creation');

  user(username: string): Viewer {
    const id = `user-${username}`;
    this.usernames.set(username.toLowerCase(), id);
    return { id };
  }

  model(owner: Viewer, fields: Partial<MemModel> = {}): MemModel {
    const model = { id: this.#modelId(), userId: owner.id, name: 'a model', public: false, createdAt: this.clock.now(), ...fields };
    this.models.set(model.id, model);
    return model;
  }

  creation(owner: Viewer, fields: Partial<MemCreation> = {}): MemCreation {
    const creation = {
      id: this.#creationId(),
      userId: owner.id,
      name: 'a creation',
      public: false,
      deleted: false,
      likeCount: 0,
      createdAt: this.clock.now(),
      ...fields,
    };
    this.creations.set(creation.id, creation);
    return creation;
  }

  newAgentId = () => this.#agentId();
}

const visible = (viewer: Viewer | null, row: { public: boolean; deleted?: boolean }, ownerId: string) =>
  !row.deleted && (row.public || viewer?.id === ownerId);

const newestFirst = <T extends { createdAt: Date; id: string }>(rows: T[]) =>
  [...rows].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || b.id.localeCompare(a.id));

const withKey = (agent: MemAgent) => ({ ...agent, user: { username: agent.key } }) as unknown as AgentWithKey;

export function memoryAgentStore(c: Catalog): AgentStore {
  /** Takes a key for an agent, or says it is taken (the store's answer, as the real one's). */
  const takeKey = (key: string, id: string) => {
    if (c.usernames.has(key.toLowerCase())) return false;
    c.usernames.set(key.toLowerCase(), id);
    return true;
  };
  return {
    list: async (viewer) => newestFirst([...c.agents.values()].filter((a) => visible(viewer, a, a.ownerId))) as never,
    find: async (id) => {
      const agent = c.agents.get(id);
      return agent ? withKey(agent) : null;
    },
    ownerOf: async (id) => c.agents.get(id)?.ownerId ?? null,
    // The catalog holds MCP servers by name only: every id given is a stranger's.
    ownMcpServers: async () => new Set<string>(),
    ownMcpServerNames: async (userId, names) => new Set((c.mcpServerNames.get(userId) ?? []).filter((n) => names.includes(n))),
    usableModels: async (viewer, wanted) =>
      new Set(wanted.filter((id) => c.models.has(id) && visible(viewer, c.models.get(id)!, c.models.get(id)!.userId))),
    createWithin: async (ownerId: string, cap: number, input: AgentPatch & { name: string; key: string }) => {
      if ([...c.agents.values()].filter((a) => a.ownerId === ownerId).length >= cap) return { refused: 'cap' as const };
      const id = c.newAgentId();
      if (!takeKey(input.key, id)) return { refused: 'key-taken' as const };
      const agent: MemAgent = {
        id,
        ownerId,
        name: input.name,
        key: input.key,
        public: input.public ?? false,
        persona: input.persona ?? '',
        isPersonaPublic: input.isPersonaPublic ?? false,
        llmSettings: input.llmSettings ?? {},
        tools: input.tools ?? {},
        toolApproval: input.toolApproval ?? {},
        models: input.models ?? [],
        createdAt: c.clock.now(),
      };
      c.agents.set(id, agent);
      c.writes.push(`create agent ${id}`);
      return withKey(agent);
    },
    delete: async (id) => {
      c.agents.delete(id);
      c.writes.push(`delete agent ${id}`);
    },
    update: async (id, patch: AgentPatch) => {
      const agent = c.agents.get(id)!;
      if (patch.key !== undefined && patch.key.toLowerCase() !== agent.key.toLowerCase()) {
        if (!takeKey(patch.key, id)) return { refused: 'key-taken' as const };
        c.usernames.delete(agent.key.toLowerCase());
      }
      const { llmSettings, toolApproval, ...rest } = patch;
      Object.assign(agent, Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)));
      if (llmSettings) agent.llmSettings = { ...agent.llmSettings, ...llmSettings };
      if (toolApproval) agent.toolApproval = { ...agent.toolApproval, ...toolApproval };
      c.writes.push(`update agent ${id}`);
      return withKey(agent);
    },
  } as AgentStore;
}

export function memoryModelStore(c: Catalog): ModelStore {
  const listed = (viewer: Viewer) => newestFirst([...c.models.values()].filter((m) => visible(viewer, m, m.userId)));
  return {
    list: async (viewer) => listed(viewer) as never,
    find: async (id) => (c.models.get(id) ?? null) as never,
    page: async (viewer, filter, window) => {
      const all = listed(viewer).filter((m) => !filter.ids || filter.ids.includes(m.id));
      // Each model as about the bytes the real store counts for a short one.
      const cut = numberedCut(
        all.map(() => 1200),
        window.page,
        window.limit,
        window.maxBytes,
      );
      return { models: all.slice(cut.start, cut.end) as never, total: all.length, cut };
    },
    update: async (id, patch) => {
      const model = Object.assign(c.models.get(id)!, patch);
      c.writes.push(`update model ${id}`);
      return model as never;
    },
  };
}

export function memoryCreationStore(c: Catalog): CreationStore {
  const seen = (viewer: Viewer, id: string) => {
    const creation = c.creations.get(id);
    return creation && visible(viewer, creation, creation.userId) ? creation : undefined;
  };
  const changeLike = (viewer: Viewer, id: string, like: boolean) => {
    const creation = seen(viewer, id);
    if (!creation) return 'not visible' as const;
    const key = `${id} ${viewer.id}`;
    if (c.likes.has(key) === like) return 'unchanged' as const;
    if (like) c.likes.add(key);
    else c.likes.delete(key);
    creation.likeCount += like ? 1 : -1;
    c.writes.push(`${like ? 'like' : 'unlike'} ${id}`);
    return { ...creation } as never;
  };
  return {
    list: async (viewer) => newestFirst([...c.creations.values()].filter((r) => visible(viewer, r, r.userId))) as never,
    findVisible: async (viewer, id) => (seen(viewer, id) ?? null) as never,
    like: async (viewer, id) => changeLike(viewer, id, true),
    unlike: async (viewer, id) => changeLike(viewer, id, false),
    likedAmong: async (viewer, wanted) => new Set(wanted.filter((id) => c.likes.has(`${id} ${viewer.id}`))),
    ownersAmong: async (viewer, wanted) =>
      new Map(wanted.flatMap((id) => (seen(viewer, id) ? [[id, c.creations.get(id)!.userId] as const] : []))),
    update: async (wanted, { deleted, ...patch }: CreationPatch) =>
      wanted.map((id) => {
        const creation = Object.assign(c.creations.get(id)!, patch, deleted ? { deleted: true } : {});
        c.writes.push(`update creation ${id}`);
        return { ...creation } as never;
      }),
  };
}
