import { createHash } from 'node:crypto';
import { credit } from '../domain/manna/index.ts';
import type { Services } from '../domain/services.ts';
import type { Prisma } from '../generated/prisma/client.ts';
import {
  DEMO_CREATION_COUNT,
  demoAgents,
  demoConcept,
  demoCreation,
  demoDeployments,
  demoModels,
  demoSessions,
  demoTriggers,
  demoUsers,
} from './dataset.ts';

/** Stable ids make the load idempotent: a second run finds every row and inserts nothing. */
export function demoId(...parts: (string | number)[]): string {
  const h = createHash('sha256')
    .update(`parley-demo:${parts.join(':')}`)
    .digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

const DEMO_GRANT = 'demo grant';

export interface DemoManifest {
  users: { id: string; username: string; apiKey: string }[];
  agents: { id: string; key: string; owner: string }[];
  deployments: { id: string; agent: string; platform: string }[];
  triggers: { id: string; agent: string; name: string }[];
  concepts: { id: string; owner: string }[];
  models: { id: string; owner: string; public: boolean }[];
  creations: { id: string; owner: string; public: boolean }[];
  shares: { share_id: string; owner: string }[];
  sessions: { id: string; owner: string; sharedWith: string[] }[];
}

type Tx = Prisma.TransactionClient;

/** The ids the demo's rows are stored under, by the names the dataset gives them. */
interface DemoIds {
  userId(username: string): string;
  agentId(key: string): string;
}

/** Every row of the demo, in an order that lets each refer to the ones before it. */
async function loadRows(tx: Tx) {
  const userId = await loadUsers(tx);
  const agentId = await loadAgents(tx, userId);
  const ids: DemoIds = { userId, agentId };
  await loadAgentWork(tx, ids);
  const conceptId = await loadConcept(tx, ids);
  await loadModels(tx, ids);
  const creations = await loadCreations(tx, ids);
  for (const [i, s] of demoSessions.entries()) await loadSession(tx, ids, i, s);
  return { userId, agentId, conceptId, creations };
}

/** The demo users, each granted its manna once (the grant's ledger row tells a second run). */
async function loadUsers(tx: Tx) {
  const userIds = new Map<string, string>();
  for (const u of demoUsers) {
    const user = await tx.user.upsert({
      where: { username: u.username },
      create: { id: demoId('user', u.username), username: u.username, userImage: u.userImage, subscriptionTier: u.subscriptionTier },
      update: {},
    });
    userIds.set(u.username, user.id);
    if (!(await tx.mannaLedger.findFirst({ where: { userId: user.id, reason: DEMO_GRANT } }))) {
      for (const kind of ['subscription', 'forever'] as const) {
        if (u.grants[kind] !== '0') await credit(tx, { userId: user.id, kind, amount: u.grants[kind], reason: DEMO_GRANT });
      }
    }
  }
  return (name: string) => userIds.get(name)!;
}

/** The demo agents; an agent already there keeps its id, and a user (not an agent) by its name stops the load. */
async function loadAgents(tx: Tx, userId: DemoIds['userId']) {
  const agentIds = new Map<string, string>();
  for (const { key, owner, ...fields } of demoAgents) {
    const existing = await tx.user.findUnique({ where: { username: key }, include: { agentProfile: true } });
    if (existing && !existing.agentProfile) throw new Error(`demo: the username "${key}" is taken by a user that is not an agent`);
    const id = existing?.id ?? demoId('agent', key);
    if (!existing) {
      // The agent's image is also its creator profile's picture, as the agents service keeps it.
      const image = `https://cdn.parley.dev/agents/${key}.jpg`;
      await tx.user.create({
        data: {
          id,
          type: 'agent',
          username: key,
          userImage: image,
          agentProfile: { create: { ...fields, suggestions: [...fields.suggestions], ownerId: userId(owner), image } },
        },
      });
    }
    agentIds.set(key, id);
  }
  return (key: string) => agentIds.get(key)!;
}

/** The agents' deployments and triggers, owned by each agent's owner. */
async function loadAgentWork(tx: Tx, { userId, agentId }: DemoIds) {
  const ownerOfAgent = (key: string) => userId(demoAgents.find((a) => a.key === key)!.owner);
  await tx.deployment.createMany({
    skipDuplicates: true,
    data: demoDeployments.map((d) => ({
      id: demoId('deployment', d.agent, d.platform),
      agentId: agentId(d.agent),
      userId: ownerOfAgent(d.agent),
      platform: d.platform,
      config: d.config,
      secrets: d.secrets,
    })),
  });
  await tx.trigger.createMany({
    skipDuplicates: true,
    data: demoTriggers.map((t) => ({
      id: demoId('trigger', t.agent, t.name),
      name: t.name,
      agentId: agentId(t.agent),
      userId: ownerOfAgent(t.agent),
      cron: t.cron,
      timezone: t.timezone,
      prompt: t.prompt,
      status: t.status,
    })),
  });
}

async function loadConcept(tx: Tx, { userId, agentId }: DemoIds) {
  const conceptId = demoId('concept', demoConcept.name);
  await tx.concept.createMany({
    skipDuplicates: true,
    data: [
      {
        id: conceptId,
        name: demoConcept.name,
        userId: userId(demoConcept.owner),
        agentId: agentId(demoConcept.agent),
        usageInstructions: demoConcept.usageInstructions,
      },
    ],
  });
  await tx.conceptImage.createMany({
    skipDuplicates: true,
    data: demoConcept.images.map((img, position) => ({ id: demoId('concept-image', conceptId, position), conceptId, position, ...img })),
  });
  return conceptId;
}

async function loadModels(tx: Tx, { userId }: DemoIds) {
  await tx.model.createMany({
    skipDuplicates: true,
    data: demoModels.map((m) => ({
      id: demoId('model', m.owner, m.name),
      userId: userId(m.owner),
      name: m.name,
      baseModel: m.baseModel,
      loraTriggerText: m.trigger,
      public: m.public,
      checkpoint: `https://cdn.parley.dev/loras/${demoId('model', m.owner, m.name)}.safetensors`,
      thumbnail: `https://cdn.parley.dev/loras/${demoId('model', m.owner, m.name)}.jpg`,
      args: { lora_rank: 16, max_train_steps: 1000 },
    })),
  });
}

async function loadCreations(tx: Tx, { userId, agentId }: DemoIds) {
  const creations = Array.from({ length: DEMO_CREATION_COUNT }, (_, n) => ({ n, ...demoCreation(n) }));
  await tx.creation.createMany({
    skipDuplicates: true,
    data: creations.map((c) => {
      const id = demoId('creation', c.n);
      return {
        id,
        userId: userId(c.owner),
        agentId: c.agent ? agentId(c.agent) : null,
        tool: c.tool,
        args: c.args,
        name: c.name,
        url: `https://cdn.parley.dev/creations/${id}.${c.ext}`,
        thumbnail: `https://cdn.parley.dev/creations/${id}-thumb.webp`,
        filename: `${id}.${c.ext}`,
        mediaAttributes: c.mediaAttributes,
        public: c.public,
        createdAt: c.createdAt,
      };
    }),
  });
  return creations;
}

/** The `i`th demo session: its agents and users, its messages a minute apart, their reactions, and its public share. */
async function loadSession(tx: Tx, { userId, agentId }: DemoIds, i: number, s: (typeof demoSessions)[number]) {
  const sessionId = demoId('session', i);
  const start = Date.UTC(2026, 10, 1 + i, 10);
  const replies = s.messages.filter((m) => m.role === 'assistant');
  await tx.session.createMany({
    skipDuplicates: true,
    data: [
      {
        id: sessionId,
        ownerId: userId(s.owner),
        title: s.title,
        createdAt: new Date(start),
        updatedAt: new Date(start + s.messages.length * 60_000),
        turnsSpent: replies.length,
        tokensSpent: replies.reduce((n, m) => n + m.usage[0] + m.usage[1], 0),
      },
    ],
  });
  await tx.sessionAgent.createMany({
    skipDuplicates: true,
    data: s.agents.map((a, position) => ({ sessionId, agentId: agentId(a), position, userId: userId(s.owner) })),
  });
  await tx.sessionUser.createMany({
    skipDuplicates: true,
    data: [
      { sessionId, userId: userId(s.owner), permission: 'owner' as const },
      ...s.sharedWith.map((w) => ({ sessionId, userId: userId(w.username), permission: w.permission })),
    ],
  });
  const agentNames = s.agents.map((key) => demoAgents.find((a) => a.key === key)!.name);
  const id = (k: number) => demoId('message', sessionId, k);
  // Each reply answers the latest user message before it.
  let prompt: string | null = null;
  const messages = [
    { id: id(0), role: 'eden' as const, senderId: null, promptId: null, content: `${agentNames.join(', ')} joined the session` },
    ...s.messages.map((m, k) => {
      if (m.role === 'user') prompt = id(k + 1);
      return {
        id: id(k + 1),
        role: m.role,
        senderId: m.role === 'user' ? userId(m.from) : agentId(m.from),
        promptId: m.role === 'assistant' ? prompt : null,
        content: m.content,
        ...(m.role === 'assistant' ? { promptTokens: m.usage[0], completionTokens: m.usage[1] } : {}),
      };
    }),
  ].map((m, k) => ({ sessionId, ...m, createdAt: new Date(start + k * 60_000) }));
  await tx.message.createMany({ skipDuplicates: true, data: messages });
  await tx.reaction.createMany({
    skipDuplicates: true,
    data: s.messages.flatMap((m, k) =>
      m.role === 'assistant' ? m.reactions.map((r) => ({ messageId: id(k + 1), userId: userId(r.from), reaction: r.reaction })) : [],
    ),
  });
  if (s.publicShare) {
    await tx.share.createMany({
      skipDuplicates: true,
      data: [
        {
          id: demoId('share', sessionId),
          sessionId,
          ownerId: userId(s.owner),
          messageId: messages.at(-1)!.id,
          title: s.title,
          public: true,
        },
      ],
    });
  }
}

/**
 * Loads the demo (all rows in one transaction), embeds its creations with the active provider so
 * search works at once, and issues one fresh API key per demo user.
 */
export async function loadDemo(services: Services): Promise<DemoManifest> {
  const { userId, agentId, conceptId, creations } = await services.db.$transaction((tx) => loadRows(tx), { timeout: 60_000 });
  // Outside the transaction: an embedding server may take its time, and rows stay loaded if it fails.
  await services.search.indexCreations(creations.map((c) => demoId('creation', c.n)));
  const users = [];
  for (const u of demoUsers)
    users.push({ id: userId(u.username), username: u.username, apiKey: (await services.apiKeys.create(userId(u.username))).apiKey });
  return {
    users,
    agents: demoAgents.map((a) => ({ id: agentId(a.key), key: a.key, owner: a.owner })),
    deployments: demoDeployments.map((d) => ({ id: demoId('deployment', d.agent, d.platform), agent: d.agent, platform: d.platform })),
    triggers: demoTriggers.map((t) => ({ id: demoId('trigger', t.agent, t.name), agent: t.agent, name: t.name })),
    concepts: [{ id: conceptId, owner: demoConcept.owner }],
    models: demoModels.map((m) => ({ id: demoId('model', m.owner, m.name), owner: m.owner, public: m.public })),
    creations: creations.map((c) => ({ id: demoId('creation', c.n), owner: c.owner, public: c.public })),
    shares: demoSessions.flatMap((s, i) => (s.publicShare ? [{ share_id: demoId('share', demoId('session', i)), owner: s.owner }] : [])),
    sessions: demoSessions.map((s, i) => ({ id: demoId('session', i), owner: s.owner, sharedWith: s.sharedWith.map((w) => w.username) })),
  };
}
