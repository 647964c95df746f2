/**
 * The sessions service's front: the service (`service.ts`: prompts, reads, reactions, members,
 * watches, settings), its inputs, its error texts, and how it is composed. Who may do what in a
 * session is `access/`'s; the autonomous turns are `autonomy/`'s, handed in as `SessionAutonomy`.
 */
export { type SessionService, sessionService } from './service.ts';
export { updateSessionSchema } from './settings.ts';
export {
  autonomySettingsSchema,
  type AutonomySettings,
  BUDGET_LIMITS,
  MAX_ATTACHMENTS,
  MAX_CONTENT,
  MAX_REPLY_INTERVAL_S,
  numberedPageSchema,
  reactionSchema,
  type SendMessageInput,
  sendMessageSchema,
  sessionUserSchema,
  whileReplyingSchema,
} from './inputs.ts';
export {
  AGENT_IDS_REQUIRED,
  AGENT_NO_LONGER_USABLE,
  NO_USABLE_AGENT,
  type PromptStarted,
  type Relay,
  type SessionAutonomy,
} from './prompting.ts';
export { DEFAULT_MESSAGE_PAGE, MAX_MESSAGE_PAGE, type MessagePage, type MessagePageArgs } from './reads.ts';
export { MESSAGE_NOT_FOUND } from './reacting.ts';
export { NOT_ALLOWED_TO_DELETE } from './members.ts';
export { PromptSavedAlready, type SessionAgent, type SessionQuery, type SessionRead, type SessionStore } from './store.ts';
export { prismaSessionStore, sessionTitles } from './prisma-store.ts';
