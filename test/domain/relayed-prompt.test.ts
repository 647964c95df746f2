import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/domain/core/ids.ts';
import { PromptSavedAlready } from '../../src/domain/sessions/index.ts';
import { domainDatabase, people } from '../helpers/domain-database.ts';
import { sessionsOver } from '../helpers/domain-sessions.ts';

/**
 * A deployment relays what a person wrote under an id it chose, so the same update relayed
 * twice (a runner that lost its lease got there first) is saved once. The second save is the
 * sessions store's answer, a domain type the relay's rules follow, never a database error they
 * would have to recognise. The sessions service over its store on a migrated database, no app.
 */
describe('a prompt relayed twice under the same id', () => {
  const t = domainDatabase();
  let services: ReturnType<typeof sessionsOver>;
  let alice: { id: string };
  let agentId: string;

  beforeAll(async () => {
    services = sessionsOver(t.db, t.bus());
    const make = await people(t.db);
    alice = await make.user('alice');
    agentId = (await make.agent(alice, { name: 'Relay', key: 'relay' })).id;
  });
  afterAll(() => services?.stop());

  it('is saved once; the second time the store answers that it was saved already', async () => {
    const { sessionId } = await services.sessions.send({ id: alice.id }, { agentIds: [agentId], content: 'Hello there' });
    const relay = { sender: alice.id, promptId: newId() };
    const send = () => services.sessions.send({ id: alice.id }, { sessionId, content: 'from the chat' }, { relay });

    expect((await send()).promptId).toBe(relay.promptId);
    await expect(send()).rejects.toBeInstanceOf(PromptSavedAlready);
    expect(await t.db.message.count({ where: { id: relay.promptId } })).toBe(1);
    expect(await t.db.message.count({ where: { promptId: relay.promptId } })).toBe(1);
  });
});
