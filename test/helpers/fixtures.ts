import type { TestApp, TestUser } from './app.ts';
import { viewerOf as viewerOfUser } from './rest-helpers.ts';

let seq = 0;
const next = () => `${Date.now().toString(36)}${(++seq).toString(36)}`;

/** Rows the tests need, made through the domain services where one exists, else through Prisma. */
export function fixtures(t: TestApp) {
  const viewerOf = (user: TestUser) => viewerOfUser(t, user);
  return {
    async agent(owner: TestUser, fields: Record<string, unknown> = {}) {
      return t.services.agents.create(await viewerOf(owner), { name: 'Test agent', key: `agent-${next()}`, public: true, ...fields });
    },
    async concept(owner: TestUser, fields: Record<string, unknown> = {}) {
      return t.services.concepts.create(await viewerOf(owner), {
        name: 'Test concept',
        images: [{ image: 'https://example.com/a.jpg', usageInstructions: 'front view' }],
        ...fields,
      });
    },
    async model(owner: TestUser, fields: { public?: boolean; name?: string } = {}) {
      return t.db.model.create({
        data: {
          userId: owner.id,
          name: fields.name ?? `LoRA ${next()}`,
          baseModel: 'flux-dev',
          public: fields.public ?? true,
          loraTriggerText: 'tok',
        },
      });
    },
    async creation(owner: TestUser, fields: { public?: boolean; deleted?: boolean; agentId?: string; tool?: string } = {}) {
      return t.db.creation.create({
        data: {
          userId: owner.id,
          agentId: fields.agentId,
          tool: fields.tool ?? 'flux_dev',
          name: `Creation ${next()}`,
          url: 'https://cdn.example.com/c.png',
          public: fields.public ?? true,
          deleted: fields.deleted ?? false,
          args: { prompt: 'a lighthouse' },
        },
      });
    },
    async deployment(agentId: string, ownerId: string, platform: 'discord' | 'telegram' = 'discord') {
      return t.db.deployment.create({
        data: { agentId, userId: ownerId, platform, config: { channel: 'general' }, secrets: { bot_token: `secret-${next()}` } },
      });
    },
    /** A trigger made as its owner makes one: 09:00 in Paris every day, its next run planned. */
    async trigger(agentId: string, ownerId: string) {
      return t.services.triggers.create({ id: ownerId }, agentId, {
        name: `Trigger ${next()}`,
        prompt: 'Say good morning',
        schedule: { second: '0', minute: '0', hour: '9', timezone: 'Europe/Paris' },
      });
    },
  };
}
