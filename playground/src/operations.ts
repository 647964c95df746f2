/** The GraphQL the playground sends; every field it shows comes from here. */

const TOOL_CALL = 'id tool args status result error cost approval';

const MESSAGE = `id role content thought status error promptId createdAt
  agent { id name } sender { username }
  toolCalls { ${TOOL_CALL} }
  reactions { reaction count reactedByMe }`;

export const ME = `query Me { me { id username balance } }`;

/** The agents the viewer may talk to: their own and public ones. */
export const AGENTS = `query Agents { agents(first: 50) { edges { node { id name key persona public owner { username } } } } }`;

export const CREATE_AGENT = `mutation CreateAgent($input: CreateAgentInput!) { createAgent(input: $input) { id name } }`;

export const SESSIONS = `query Sessions { sessions(first: 20) { edges { node { id title updatedAt agents { id name } } } } }`;

export const SESSION = `query Session($id: ID!) { session(id: $id) {
  id title status agents { id name }
  messages(last: 50) { edges { node { ${MESSAGE} } } }
} }`;

export const SEND = `mutation Send($input: SendMessageInput!) { sendMessage(input: $input) { seq promptId session { id } } }`;

export const REACT = `mutation React($messageId: ID!, $reaction: String!) { reactToMessage(messageId: $messageId, reaction: $reaction) { messageId reactions { reaction count reactedByMe } } }`;

export const CANCEL = `mutation Cancel($sessionId: ID!) { cancelReplies(sessionId: $sessionId) }`;

/** Approves or denies a tool call that waits for the viewer's answer (they pay for it). */
export const SETTLE_APPROVAL = `mutation SettleApproval($input: SettleToolApprovalInput!) { settleToolApproval(input: $input) { ${TOOL_CALL} } }`;

export const SHARE = `mutation Share($id: ID!) { shareSession(id: $id) { shareId } }`;

export const SHARED = `query Shared($shareId: ID!) { share(shareId: $shareId) {
  shareId title createdAt owner { username } agents { key name }
  messages { id role content createdAt sender { username } }
} }`;

export const EVENTS = `subscription Events($sessionId: ID!, $after: Seq) { sessionEvents(sessionId: $sessionId, after: $after) {
  __typename seq
  ... on PromptStarted { promptId replyIds agentIds message { ${MESSAGE} } }
  ... on AssistantToken { messageId agentId text }
  ... on AssistantThinking { messageId agentId text }
  ... on ToolCompleted { messageId toolCall { ${TOOL_CALL} } }
  ... on ToolCancelled { messageId toolCall { ${TOOL_CALL} } }
  ... on ToolApprovalRequested { messageId agentId expiresAt toolCall { ${TOOL_CALL} } }
  ... on ToolApprovalSettled { messageId agentId toolCall { ${TOOL_CALL} } }
  ... on AssistantMessage { message { ${MESSAGE} } }
  ... on ReplyFailed { error message { ${MESSAGE} } }
  ... on ReplyRemoved { messageId }
  ... on PromptEnded { promptId }
  ... on ReactionsChanged { messageId reactions { reaction count reactedByMe } }
} }`;

export interface ToolCall {
  id: string;
  tool: string;
  args: unknown;
  status: string;
  result: unknown;
  error: string | null;
  /** Charged, or while it waits for approval its price. */
  cost: number | null;
  approval: 'REQUESTED' | 'APPROVED' | 'DENIED' | 'EXPIRED' | null;
  /** When a call that waits counts as denied, as its live event told (not kept on the message). */
  expiresAt?: string;
}
export interface Reaction {
  reaction: string;
  count: number;
  reactedByMe: boolean;
}
export interface Message {
  id: string;
  role: string;
  content: string;
  thought: string | null;
  status: string;
  error: string | null;
  promptId: string | null;
  createdAt: string;
  agent: { id: string; name: string } | null;
  sender: { username: string } | null;
  toolCalls: ToolCall[];
  reactions: Reaction[];
}
export interface Agent {
  id: string;
  name: string;
  key: string;
  persona: string | null;
  public: boolean;
  owner: { username: string };
}
export type SessionEvent = { __typename: string; seq: number } & Partial<{
  promptId: string;
  replyIds: string[];
  agentIds: string[];
  messageId: string;
  agentId: string;
  text: string;
  error: string;
  message: Message;
  toolCall: ToolCall;
  expiresAt: string;
  reactions: Reaction[];
}>;
