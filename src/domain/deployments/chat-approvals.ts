import type { ToolCallChange, ToolCallView } from '../core/events.ts';
import { isDomainError } from '../core/errors.ts';
import type { DeploymentConfig } from './inputs.ts';
import type { InboundPress, Outbox } from './ports.ts';

/** Arguments as a chat reads them: JSON, cut short. */
const ARGS_SHOWN = 300;

/**
 * Answers to tool calls, as a deployment's chat gives them: the owner of a deployment answers
 * for every call its replies make (they pay for them), so a press is taken only from the
 * Telegram user they named; settled as the owner, through the one front every surface uses.
 */
export interface ChatSettle {
  settle(ownerId: string, sessionId: string, callId: string, approve: boolean): Promise<unknown>;
}

/** The platform user who may press Approve / Deny in the deployment's chats; null: none (the owner answers in the app). */
export function approverOf(platform: string, config: DeploymentConfig): string | null {
  return platform === 'telegram' ? (config.telegram?.approver_user_id ?? null) : null;
}

const argsOf = (args: unknown) => {
  const text = JSON.stringify(args ?? {});
  return text.length > ARGS_SHOWN ? `${text.slice(0, ARGS_SHOWN - 1)}…` : text;
};
const priceOf = (cost: number | null) => (cost === null ? 'its price not known yet' : `for ${cost} manna`);
const whenOf = (iso: string) => `${new Date(iso).toISOString().slice(0, 16).replace('T', ' ')} UTC`;
const headOf = (call: ToolCallView) => `The agent asks to use ${call.tool}, ${priceOf(call.cost)}.\nArguments: ${argsOf(call.args)}`;

/** What the chat reads when a call waits: the tool, its arguments, its price, when it counts as denied. */
export function askText(call: ToolCallView, expiresAt: string, buttons: boolean): string {
  const lines = [headOf(call), `Unanswered by ${whenOf(expiresAt)}, it counts as denied.`];
  if (!buttons) lines.push("It waits for the owner's answer in the app.");
  return lines.join('\n');
}

/** What the chat reads once the call (`asked`, as it was asked) is settled as `now` says, however it was. */
export function settledText(asked: ToolCallView, now: ToolCallView['approval']): string {
  const outcome =
    now === 'approved'
      ? 'Approved.'
      : now === 'denied'
        ? 'Denied.'
        : now === 'expired'
          ? 'Not answered in time: denied.'
          : 'Not run: the reply ended.';
  return `${headOf(asked)}\n${outcome}`;
}

/**
 * Follows one reply's calls that wait for approval in its chat: each is told as it comes (with
 * buttons when an approver is set), and its message loses its buttons once the call ends,
 * whichever surface settled it. `done` waits for what was sent and settles what is left.
 */
export function followApprovals(outbox: Outbox, replyTo: string, approver: string | null) {
  const asked = new Map<string, { ref: Promise<string | null>; call: ToolCallView }>();
  let queue: Promise<unknown> = Promise.resolve();
  const then = (work: () => Promise<unknown>) => {
    queue = queue.then(work).catch(() => {});
  };
  const settle = (callId: string, approval: ToolCallView['approval']) => {
    const entry = asked.get(callId);
    if (!entry) return;
    asked.delete(callId);
    then(async () => {
      const ref = await entry.ref;
      if (ref) await outbox.approvalSettled(ref, settledText(entry.call, approval));
    });
  };

  return {
    change(change: ToolCallChange) {
      const call = change.toolCall;
      if (change.type !== 'approval_requested') return settle(call.id, call.approval);
      if (asked.has(call.id)) return;
      const buttons = approver !== null;
      const ref = outbox
        .askApproval({ callId: call.id, text: askText(call, change.expiresAt, buttons), buttons }, replyTo)
        .catch(() => null);
      asked.set(call.id, { ref, call });
      then(() => ref);
    },
    async done() {
      for (const id of [...asked.keys()]) settle(id, null);
      await queue;
    },
  };
}

/** The answer a press gets, as Telegram shows it above the chat. */
export const PRESS_ANSWERS = {
  approved: 'Approved',
  denied: 'Denied',
  notYours: "Not yours: only the owner's approver can answer this",
  settled: 'Already settled',
  none: 'This button answers nothing here',
} as const;

/**
 * A press of Approve or Deny: taken only from the approver, for a call of the session of the
 * chat it was pressed in (so a press names no call elsewhere), settled as the owner; its buttons
 * go at once (the reply's follower then writes the outcome in). Everyone else's press changes
 * nothing; a press on a call settled already (anywhere) is told so, and its buttons go.
 */
export async function answerPress(
  p: InboundPress,
  at: { outbox: Outbox; ownerId: string; approver: string | null; sessionId: string | null },
  approvals: ChatSettle,
): Promise<void> {
  const { outbox } = at;
  const reply = (text: string) => outbox.answerPress(p.pressId, text);
  if (!p.choice) return reply(PRESS_ANSWERS.none);
  if (at.approver === null || at.approver !== p.sender.ref) return reply(PRESS_ANSWERS.notYours);
  if (!at.sessionId) return reply(PRESS_ANSWERS.none);
  try {
    await approvals.settle(at.ownerId, at.sessionId, p.choice.callId, p.choice.approve);
  } catch (e) {
    if (!isDomainError(e)) throw e;
    if (e.code !== 'CONFLICT') return reply(PRESS_ANSWERS.none);
    await reply(PRESS_ANSWERS.settled);
    return outbox.approvalSettled(p.messageRef, null);
  }
  await reply(p.choice.approve ? PRESS_ANSWERS.approved : PRESS_ANSWERS.denied);
  await outbox.approvalSettled(p.messageRef, null);
}
