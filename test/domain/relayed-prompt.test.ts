import { describe, expect, it } from 'vitest';
import { newId } from '../../src/domain/core/ids.ts';
import { PromptSavedAlready } from '../../src/domain/sessions/store.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { newSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * A deployment relays what a person wrote under an id it chose, so the same update relayed
 * twice (a runner that lost its lease got there first) is saved once. The second save is the
 * sessions store's answer, a domain type the relay's rules follow, never a database error they
 * would have to recognise.
 */
describe('a prompt relayed twice under the same id', () => {
  let t: TestApp;
  let alice: TestUser;
  let agentId: string;

  setUp(async (start) => {
    const llm = await start.fakeOpenAI({ tokens: ['Noted', '.'] });
    t = await start.app({ llm: { baseUrl: llm.baseUrl } });
    alice = await t.createUser('alice');
    agentId = (await fixtures(t).agent(alice, { name: 'Relay', key: 'relay' })).id;
  });

  it('is saved once; the second time the store answers that it was saved already', async () => {
    const sessionId = await newSession(t, alice, [agentId]);
    const relay = { sender: alice.id, promptId: newId() };
    const send = () => t.services.sessions.send({ id: alice.id }, { sessionId, content: 'from the chat' }, { relay });

    expect((await send()).promptId).toBe(relay.promptId);
    await expect(send()).rejects.toBeInstanceOf(PromptSavedAlready);
    expect(await t.db.message.count({ where: { id: relay.promptId } })).toBe(1);
    expect(await t.db.message.count({ where: { promptId: relay.promptId } })).toBe(1);
  });
});
