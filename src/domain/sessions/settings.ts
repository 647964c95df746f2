import type { EventBus } from '../core/bus.ts';
import { forbidden } from '../core/errors.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { canManage, canPost, NO_ACCESS, type SessionAccess } from '../access/service.ts';
import { type AutonomySettings, type SendMessageInput, sendMessageSchema } from './inputs.ts';
import type { SessionAutonomy } from './prompting.ts';
import type { SessionSettings, SessionStore } from './store.ts';

/** What a change of a session's settings carries, in a prompt or on its own. */
type Changes = Pick<SendMessageInput, 'title' | 'scenario' | 'budget' | 'autonomySettings' | 'whileReplying'>;

/** A change of a session's settings without a prompt: the fields of a prompt that change them, checked alike. */
export const updateSessionSchema = sendMessageSchema
  .pick({ sessionId: true, title: true, scenario: true, budget: true, autonomySettings: true, whileReplying: true })
  .required({ sessionId: true });

const OWNER_ONLY = 'Only an owner of this session can change its title, scenario or budget';

/** The settings a change sets, as the store takes them (undefined: left as they are). */
const settingsOf = (input: Changes): SessionSettings => ({
  title: input.title,
  scenario: input.scenario,
  mannaBudget: input.budget?.mannaBudget,
  tokenBudget: input.budget?.tokenBudget,
  turnBudget: input.budget?.turnBudget,
  autoReply: input.autonomySettings?.autoReply,
  replyInterval: input.autonomySettings?.replyInterval,
  actorSelection: input.autonomySettings?.actorSelectionMethod,
  whileReplying: input.whileReplying,
});

export interface SettingsDependencies {
  store: Pick<SessionStore, 'settingsOf' | 'updateSettings'>;
  bus: Pick<EventBus, 'publish'>;
  access: Pick<SessionAccess, 'permissionIn'>;
  autonomy: SessionAutonomy;
}

/** A change of settings allowed, as the rules save and announce it. */
export interface AllowedChange {
  settings: SessionSettings;
  /** Whether any setting changes (a prompt may change none). */
  changes: boolean;
  autonomy: AutonomySettings | undefined;
  /** Whether auto-reply was on before the change. */
  autonomyWasOn: boolean;
}

/**
 * Whether the caller may make this change to `sessionId` (none: a session they are creating):
 * posting to a session needs `editor`, changing its settings `owner`, and auto-reply a budget.
 */
export async function allowChange(
  { access, autonomy }: Pick<SettingsDependencies, 'access' | 'autonomy'>,
  viewer: Viewer,
  sessionId: string | undefined,
  input: Changes,
): Promise<AllowedChange> {
  const settings = settingsOf(input);
  const changes = Object.values(settings).some((v) => v !== undefined);
  if (sessionId) {
    const permission = await access.permissionIn(viewer, sessionId);
    if (!canPost(permission)) throw forbidden(NO_ACCESS);
    if (changes && !canManage(permission)) throw forbidden(OWNER_ONLY);
  }
  const setsBudget = Object.values(input.budget ?? {}).some((v) => v !== undefined);
  const autonomyWasOn = await autonomy.check(sessionId, input.autonomySettings, setsBudget);
  return { settings, changes, autonomy: input.autonomySettings, autonomyWasOn };
}

/** After a change of an existing session is saved: its watchers hear of it, and the autonomous loop starts or stops. */
export async function announceChange(
  { store, bus, autonomy }: Omit<SettingsDependencies, 'access'>,
  sessionId: string,
  change: AllowedChange,
) {
  if (change.changes) {
    const s = await store.settingsOf(sessionId);
    if (s) await bus.publish(sessionId, { type: 'session_updated', title: s.title, scenario: s.scenario });
  }
  if (change.autonomy) await autonomy.changed(sessionId, change.autonomy, change.autonomyWasOn);
}

/** Changing a session's settings on their own: its title, scenario, budgets and autonomy. */
export function settingRules(deps: SettingsDependencies) {
  return {
    /**
     * Changes the settings `patch` names (`title`, `scenario`, `budget`, `autonomySettings`, as
     * in a prompt) and tells the session's watchers; the owner's alone, and auto-reply needs a
     * budget. A patch that changes nothing changes nothing, for anyone who may post.
     */
    async update(viewer: Viewer, id: string, patch: object) {
      const { sessionId, ...input } = parseInput(updateSessionSchema, { ...patch, sessionId: id });
      const change = await allowChange(deps, viewer, sessionId, input);
      if (change.changes) await deps.store.updateSettings(sessionId, change.settings);
      await announceChange(deps, sessionId, change);
    },
  };
}
