import { randomBytes } from 'node:crypto';
import type { DeploymentConfig } from '../../../src/domain/deployments/inputs.ts';
import {
  type Answers,
  type ChatReply,
  type Connector,
  type Conversation,
  type Outbox,
  PlatformUnreachable,
  SecretsRefused,
} from '../../../src/domain/deployments/ports.ts';
import type { Conversations } from '../../../src/domain/deployments/relay.ts';
import type { DeploymentRuntimeStore, RecordedUpdate } from '../../../src/domain/deployments/runtime-store.ts';
import {
  AccountTaken,
  type DeploymentQuery,
  type DeploymentRead,
  type DeploymentStore,
  type KeptDeployment,
} from '../../../src/domain/deployments/store.ts';
import type { Viewer } from '../../../src/domain/core/viewer.ts';
import { notFound } from '../../../src/domain/core/errors.ts';
import { sealerOver } from '../../../src/secrets/keyring.ts';
import { ids } from './clock.ts';

/**
 * Deployments kept in maps, with what the Prisma stores hold in SQL: one deployment per agent
 * and platform, one per account on a platform (AccountTaken naming the holder), a change written
 * whole or not at all. Time is the real clock throughout, as the relay's own "now" is.
 */
export class Deployments {
  readonly agents = new Map<string, { ownerId: string; name: string }>();
  readonly rows = new Map<string, KeptDeployment>();
  /** Every write the store made, in order: a refused request adds none. */
  readonly writes: string[] = [];
  readonly #userId = ids('user');
  readonly #agentId = ids('agent');
  readonly #deploymentId = ids('deployment');

  user(): Viewer {
    return { id: this.#userId() };
  }

  agent(owner: Viewer, name = 'Ada'): string {
    const id = this.#agentId();
    this.agents.set(id, { ownerId: owner.id, name });
    return id;
  }

  of(agentId: string) {
    return [...this.rows.values()].filter((r) => r.agentId === agentId);
  }

  newRow(agentId: string, platform: KeptDeployment['platform'], userId: string): KeptDeployment {
    const now = new Date();
    return {
      id: this.#deploymentId(),
      agentId,
      userId,
      platform,
      config: {},
      sealed: null,
      valid: true,
      running: false,
      lastError: null,
      account: null,
      accountId: null,
      cursor: null,
      capStoppedUntil: null,
      createdAt: now,
      updatedAt: now,
    };
  }
}

const shown = <Q extends DeploymentQuery>({ sealed: _sealed, ...row }: KeptDeployment) => ({ ...row }) as DeploymentRead<Q>;
const newest = (a: KeptDeployment, b: KeptDeployment) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1);

export function memoryDeploymentStore(d: Deployments): DeploymentStore {
  const owned = (ownerId: string) => [...d.rows.values()].filter((r) => d.agents.get(r.agentId)?.ownerId === ownerId).sort(newest);
  const find = (agentId: string, platform: string) => [...d.rows.values()].find((r) => r.agentId === agentId && r.platform === platform);
  return {
    async findOwned(ownerId, id) {
      const row = owned(ownerId).find((r) => r.id === id);
      return row ? shown(row) : null;
    },
    async listOwned<Q extends DeploymentQuery>(ownerId: string) {
      return owned(ownerId).map((r) => shown<Q>(r));
    },
    async agentOwner(agentId) {
      return d.agents.get(agentId)?.ownerId ?? null;
    },
    async byId(id) {
      const row = d.rows.get(id);
      return row ? shown(row) : null;
    },
    async forAgent(agentId, platform) {
      const row = find(agentId, platform);
      return row ? { ...row } : null;
    },
    async listForAgent<Q extends DeploymentQuery>(agentId: string) {
      return d
        .of(agentId)
        .sort(newest)
        .map((r) => shown<Q>(r));
    },
    async change(key, create, decide) {
      if (!d.agents.has(key.agentId)) return null;
      const kept = find(key.agentId, key.platform);
      if (!kept && !create) return null;
      const row = kept ? { ...kept } : d.newRow(key.agentId, key.platform, create!.userId);
      const change = decide(kept ? { ...kept } : null, row.id);
      const next: KeptDeployment = { ...row, ...change, updatedAt: new Date() } as KeptDeployment;
      const holder = next.accountId
        ? [...d.rows.values()].find((r) => r.id !== next.id && r.platform === next.platform && r.accountId === next.accountId)
        : undefined;
      if (holder) {
        const agent = d.agents.get(holder.agentId)!;
        throw new AccountTaken({ agentId: holder.agentId, agentName: agent.name, ownerId: agent.ownerId });
      }
      d.rows.set(next.id, next);
      d.writes.push(`${kept ? 'change' : 'create'} ${next.id}`);
      return shown(next);
    },
    async remove(agentId, platform) {
      const row = find(agentId, platform);
      if (!row) return false;
      d.rows.delete(row.id);
      d.writes.push(`remove ${row.id}`);
      return true;
    },
    async count() {
      return d.rows.size;
    },
    async sealedAfter(afterId, limit) {
      return [...d.rows.values()]
        .filter((r) => afterId === null || r.id > afterId)
        .sort((a, b) => (a.id < b.id ? -1 : 1))
        .slice(0, limit)
        .map((r) => ({ id: r.id, sealed: r.sealed }));
    },
    async replaceSealed(id, from, to) {
      const row = d.rows.get(id);
      if (row?.sealed !== from) return false;
      row.sealed = to;
      return true;
    },
    async sealedFor(wanted) {
      return new Map(wanted.filter((id) => d.rows.has(id)).map((id) => [id, d.rows.get(id)!.sealed]));
    },
    async sealedKeys() {
      const counts = new Map<string, number>();
      for (const r of d.rows.values()) if (r.sealed) counts.set(r.sealed.split('.')[1]!, (counts.get(r.sealed.split('.')[1]!) ?? 0) + 1);
      return [...counts].map(([keyId, deployments]) => ({ keyId, deployments, webhooks: 0, mcpServers: 0 }));
    },
  };
}

/** The service's own AES-GCM sealer, over a key held in memory. */
export const memorySealer = () => sealerOver({ list: [randomBytes(32)] });

/**
 * A Telegram-like platform: a token `<bot id>:<secret>` opens the bot `@bot<id>`; tokens in
 * `refused` are turned away, and while `away` it cannot be reached. Each question is recorded.
 */
export function fakePlatform() {
  const refused = new Set<string>();
  const asked: string[] = [];
  const state = { away: false };
  const connector: Connector = {
    platform: 'telegram',
    async validate(secrets) {
      const token = secrets.token ?? '';
      asked.push(token);
      if (state.away) throw new PlatformUnreachable('the platform is away');
      if (refused.has(token)) throw new SecretsRefused('secrets.telegram.token', 'the platform refused this token');
      const bot = token.split(':')[0]!;
      return { account: `@bot${bot}`, accountId: bot };
    },
    start() {
      throw new Error('the rules of deploying start no receiver');
    },
    deliver() {
      throw new Error('the rules of deploying deliver nothing');
    },
  };
  return { connector, refused, asked, state };
}

/** What a chat was told, in order: notices and finished answers. */
export interface Said {
  conversation: string;
  kind: 'notice' | 'answer' | 'approval';
  text: string;
  replyTo: string;
}

/** A platform that delivers into a list: what each chat was told, in order. */
export function listeningPlatform(said: Said[]): Connector {
  return {
    platform: 'telegram',
    validate: async () => ({ account: '@bot', accountId: '1' }),
    start() {
      throw new Error('the relay reads no platform itself');
    },
    deliver(_secrets, conversation): Outbox {
      return {
        async notice(text, replyTo) {
          said.push({ conversation: conversation.id, kind: 'notice', text, replyTo });
        },
        async askApproval({ callId, text }, replyTo) {
          said.push({ conversation: conversation.id, kind: 'approval', text, replyTo });
          return `${callId}-asked`;
        },
        async approvalSettled() {},
        async answerPress() {},
        answer({ messageRef, sent }) {
          return {
            typing() {},
            show() {},
            async finish(text) {
              said.push({ conversation: conversation.id, kind: 'answer', text, replyTo: messageRef });
              await sent([`${messageRef}-answer`]);
              return [`${messageRef}-answer`];
            },
            close() {},
          };
        },
      };
    },
  };
}

interface MemChat {
  id: string;
  deploymentId: string;
  conversationId: string;
  title: string;
  sessionId: string | null;
  windowStart: number | null;
  windowCount: number;
  notices: Map<string, number>;
}

/**
 * The running side in memory: one deployment's context, its chats with their message windows
 * and notices, the manna spent today, senders, prompts and their replies, and how each update
 * was settled. `Conversations` over it saves each prompt with the agent's reply to it, as the
 * sessions service would once the reply ended.
 */
export class Relayed {
  context = {
    running: true,
    valid: true,
    userId: 'owner',
    agentId: 'agent',
    platform: 'telegram' as const,
    config: {} as DeploymentConfig,
  };
  spent = 0;
  /** Whether an update may take a new prompt id (false: another runner took it first). */
  retries = false;
  readonly chats = new Map<string, MemChat>();
  readonly senders = new Map<string, string>();
  readonly sessions = new Map<string, { ownerId: string; agentId: string; title: string }>();
  readonly prompts = new Map<string, { sessionId: string; sender: string; text: string; reply: ChatReply }>();
  readonly settled = new Map<string, string>();
  /** How the agent replies to a text (complete, by default, echoing it). */
  reply: (text: string) => ChatReply = (text) => ({
    status: 'complete',
    content: `You said: ${text}`,
    error: null,
    toolCalls: [],
    interrupted: false,
  });
  readonly #chatId = ids('chat');
  readonly #sessionId = ids('session');
  readonly #userId = ids('sender');
  #eventId = 0;

  update(conversation: Partial<Conversation> & { id: string }, text: string, sender = { ref: '42', name: 'Grace' }): RecordedUpdate {
    const n = ++this.#eventId;
    return {
      id: `update-${n}`,
      eventId: String(n),
      conversation: { title: `Chat ${conversation.id}`, kind: 'group', ...conversation },
      messageRef: `message-${n}`,
      senderRef: sender.ref,
      senderName: sender.name,
      text,
      promptId: `prompt-${n}`,
      attempts: 0,
      replyRefs: [],
    };
  }

  chatOf(conversationId: string) {
    return [...this.chats.values()].find((c) => c.conversationId === conversationId);
  }

  store(): DeploymentRuntimeStore {
    const unused = (): never => {
      throw new Error('not a statement the relay makes');
    };
    return {
      claim: unused,
      release: unused,
      receive: unused,
      pending: unused,
      cannotOpen: unused,
      capReached: async () => {},
      invalidate: unused,
      noteError: async () => {},
      relayContext: async () => ({ ...this.context }),
      chat: async (deploymentId, conversation) => {
        let chat = [...this.chats.values()].find((c) => c.deploymentId === deploymentId && c.conversationId === conversation.id);
        if (!chat) {
          chat = {
            id: this.#chatId(),
            deploymentId,
            conversationId: conversation.id,
            title: conversation.title,
            sessionId: null,
            windowStart: null,
            windowCount: 0,
            notices: new Map(),
          };
          this.chats.set(chat.id, chat);
        }
        chat.title = conversation.title;
        return { id: chat.id, sessionId: chat.sessionId };
      },
      setChatSession: async (chatId, sessionId) => {
        this.chats.get(chatId)!.sessionId = sessionId;
      },
      countMessage: async (chatId, limit, windowMs) => {
        const chat = this.chats.get(chatId)!;
        const now = Date.now();
        if (chat.windowStart === null || chat.windowStart <= now - windowMs) {
          chat.windowStart = now;
          chat.windowCount = 1;
        } else chat.windowCount++;
        return { allowed: chat.windowCount <= limit, resetAt: new Date(chat.windowStart + windowMs) };
      },
      noticeDue: async (chatId, reason, until) => {
        const notices = this.chats.get(chatId)!.notices;
        if ((notices.get(reason) ?? 0) > Date.now()) return false;
        notices.set(reason, until.getTime());
        return true;
      },
      spentToday: async () => this.spent,
      sender: async (platform, ref) => {
        const key = `${platform} ${ref}`;
        if (!this.senders.has(key)) this.senders.set(key, this.#userId());
        return this.senders.get(key)!;
      },
      setReplyRefs: async () => {},
      finishUpdate: async (updateId, status) => {
        if (!this.settled.has(updateId)) this.settled.set(updateId, status);
      },
      retryUpdate: async () => this.retries,
    };
  }

  /** The replies as saved: whole already when the prompt is, so a wait for them ends at once. */
  answers(): Answers {
    const outcome = async (promptId: string) => {
      const prompt = this.prompts.get(promptId);
      return prompt && this.sessions.has(prompt.sessionId) ? { sessionId: prompt.sessionId, replies: [prompt.reply] } : null;
    };
    return {
      outcome,
      awaitOutcome: async ({ promptId, signal }) => (signal.aborted ? 'stopped' : ((await outcome(promptId)) ?? 'gone')),
    };
  }

  conversations(): Conversations {
    return {
      open: async (ownerId, agentId, title) => {
        const id = this.#sessionId();
        this.sessions.set(id, { ownerId, agentId, title });
        return id;
      },
      post: async (_ownerId, sessionId, text, { sender, promptId }) => {
        if (!this.sessions.has(sessionId)) throw notFound('Session not found');
        if (this.prompts.has(promptId)) return { conflict: 'saved-already' as const };
        this.prompts.set(promptId, { sessionId, sender, text, reply: this.reply(text) });
        // No position: the reply is awaited from the saved rows, which hold it whole already.
        return { after: null };
      },
    };
  }
}
