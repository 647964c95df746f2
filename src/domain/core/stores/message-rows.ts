import type { Prisma } from '../../../generated/prisma/client.ts';
import type { MessageView, ToolCallView } from '../events.ts';
import { reactionsView } from '../views.ts';

/**
 * A message's own columns: all a message just written has (no tool calls or reactions yet, so
 * there is nothing to join).
 */
export const newMessageSelect = {
  id: true,
  ordinal: true,
  sessionId: true,
  role: true,
  senderId: true,
  promptId: true,
  status: true,
  content: true,
  attachments: true,
  thought: true,
  error: true,
  promptTokens: true,
  completionTokens: true,
  createdAt: true,
} satisfies Prisma.MessageSelect;

/** What every message read selects, so a view can be built from it. */
export const messageSelect = {
  ...newMessageSelect,
  toolCalls: { orderBy: { position: 'asc' } },
  reactions: { select: { userId: true, reaction: true }, orderBy: { createdAt: 'asc' } },
} satisfies Prisma.MessageSelect;

export type MessageRow = Prisma.MessageGetPayload<{ select: typeof messageSelect }>;

export const toToolCallView = (c: MessageRow['toolCalls'][number]): ToolCallView => ({
  id: c.id,
  tool: c.tool,
  args: c.args,
  status: c.status,
  result: c.result,
  cost: c.cost === null ? null : c.cost.toNumber(),
  error: c.error,
  approval: c.approval,
});

export const toMessageView = (m: MessageRow): MessageView => ({
  id: m.id,
  sessionId: m.sessionId,
  ordinal: m.ordinal,
  role: m.role,
  senderId: m.senderId,
  promptId: m.promptId,
  status: m.status,
  content: m.content,
  attachments: m.attachments,
  thought: m.thought,
  error: m.error,
  promptTokens: m.promptTokens,
  completionTokens: m.completionTokens,
  toolCalls: m.toolCalls.map(toToolCallView),
  reactions: reactionsView(m.reactions),
  createdAt: m.createdAt.toISOString(),
});
