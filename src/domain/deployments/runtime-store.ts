import { recordWebhookEvent, type WebhookEventInput } from '../webhooks/index.ts';
import type { Db } from '../../db/database.ts';
import type { DeploymentPlatform, DeploymentUpdateStatus } from '../../generated/prisma/enums.ts';
import { newId } from '../core/ids.ts';
import { isDatabaseUnavailable, isUniqueViolation } from '../core/stores/prisma-errors.ts';
import { addCreator, renameCreator } from '../creators/store.ts';
import { type Recordable, SKIPPED } from './inbound.ts';
import type { DeploymentConfig } from './inputs.ts';
import type { Conversation } from './ports.ts';

/** A running deployment this instance holds the lease of, as its runner needs it. */
export interface HeldDeployment {
  id: string;
  platform: DeploymentPlatform;
  agentId: string;
  userId: string;
  sealed: string | null;
  cursor: string | null;
  /** Changes whenever its secrets do: a runner on older secrets is started again. */
  version: string;
}

/** A recorded update, as it waits to be answered. */
export interface RecordedUpdate {
  id: string;
  eventId: string;
  conversation: Conversation;
  messageRef: string;
  senderRef: string;
  senderName: string;
  text: string;
  promptId: string;
  attempts: number;
  replyRefs: string[];
}

/** What answering needs of the deployment now (its owner may change its config meanwhile). */
export interface RelayContext {
  running: boolean;
  valid: boolean;
  userId: string;
  agentId: string;
  platform: DeploymentPlatform;
  config: DeploymentConfig;
}

/** Every statement running deployments need: leases, the cursor, recorded updates, chats, senders. */
export interface DeploymentRuntimeStore {
  /**
   * Renews this instance's leases and takes those nobody holds (or whose holder let them
   * expire), for every running, valid deployment on `platforms` but those in `skip`; gives up
   * its leases of any other. Returns the deployments it holds now.
   */
  claim(holder: string, ttlMs: number, platforms: DeploymentPlatform[], skip: string[]): Promise<HeldDeployment[]>;
  /** Gives up this instance's leases (of one deployment, or all). */
  release(holder: string, deploymentId?: string): Promise<void>;
  /**
   * Records updates with the cursor past them, in one transaction, only while `holder` holds the
   * lease, the deployment runs and its cursor is still `from`; those marked `skipped` are kept
   * with the reason only, unanswered. Null: nothing was recorded. Otherwise, the event ids of
   * those skipped because the database refused what they carried: the rest are recorded
   * without them, so that no update can hold up the ones after it.
   */
  receive(
    deploymentId: string,
    holder: string,
    from: string | null,
    to: string,
    messages: Recordable[],
  ): Promise<{ refused: string[] } | null>;
  /** Updates still to answer, in the order they were read. */
  pending(deploymentId: string): Promise<RecordedUpdate[]>;
  relayContext(deploymentId: string): Promise<RelayContext | null>;
  /** The chat of a conversation, made on first sight (its title kept up to date). */
  chat(deploymentId: string, conversation: Conversation): Promise<{ id: string; sessionId: string | null }>;
  setChatSession(chatId: string, sessionId: string | null): Promise<void>;
  /** Counts a message in the chat's window; whether it is within `limit`, and when the window ends. */
  countMessage(chatId: string, limit: number, windowMs: number): Promise<{ allowed: boolean; resetAt: Date }>;
  /** True, once per period: records that the chat is told `reason` until `until`, unless it was already. */
  noticeDue(chatId: string, reason: string, until: Date): Promise<boolean>;
  /** Manna the deployment's chats hold today (UTC, by the database's clock): what counts against its daily cap. */
  spentToday(deploymentId: string): Promise<number>;
  /** The user that sends a platform person's messages, made on first sight and renamed after them. */
  sender(platform: DeploymentPlatform, ref: string, name: string): Promise<string>;
  setReplyRefs(updateId: string, refs: string[]): Promise<void>;
  /** Marks the update done (`note`: why it was not answered, when that is not plain). */
  finishUpdate(updateId: string, status: Exclude<DeploymentUpdateStatus, 'received'>, note?: string): Promise<void>;
  /** Gives the update a new prompt to answer it again; false when another runner did first. */
  retryUpdate(updateId: string, from: string, to: string): Promise<boolean>;
  /** The platform refused the secrets: not valid, not running, and why. */
  invalidate(deploymentId: string, reason: string): Promise<void>;
  /** What the deployment last failed at (null: nothing now). */
  noteError(deploymentId: string, error: string | null): Promise<void>;
  /** Its secrets cannot be opened here: `noteError`, and its owner's webhooks told the first time. */
  cannotOpen(deploymentId: string, error: string): Promise<void>;
  /** Its daily manna cap is reached until `until`: its owner's webhooks told once for that period. */
  capReached(deploymentId: string, until: Date, detail: string): Promise<void>;
}

/** How a person is named as a sender: their platform name, and who they are there (names are not unique). */
export const senderUsername = (platform: string, ref: string, name: string) => `${name} (${platform} ${ref})`;

export function deploymentRuntimeStore(db: Db): DeploymentRuntimeStore {
  return {
    ...leases(db),
    ...updates(db),
    ...chats(db),
    ...deploymentState(db),
    sender: (platform, ref, name) => senderOf(db, platform, ref, name),
  };
}

/** Who reads each deployment, and how far: the lease, and the cursor moved with what it read. */
function leases(db: Db): Pick<DeploymentRuntimeStore, 'claim' | 'release' | 'receive'> {
  return {
    async claim(holder, ttlMs, platforms, skip) {
      const rows = await db.$queryRaw<(Omit<HeldDeployment, 'platform'> & { platform: string })[]>`
        WITH eligible AS (
          SELECT "id" FROM "Deployment"
          WHERE "running" AND "valid" AND "platform"::text = ANY(${platforms}::text[]) AND NOT ("id" = ANY(${skip}::text[]))
        ), released AS (
          DELETE FROM "DeploymentLease" WHERE "holder" = ${holder} AND "deploymentId" NOT IN (SELECT "id" FROM eligible)
        ), claimed AS (
          INSERT INTO "DeploymentLease" ("deploymentId", "holder", "expiresAt")
          SELECT "id", ${holder}, now() + ${ttlMs}::int * interval '1 millisecond' FROM eligible
          ON CONFLICT ("deploymentId") DO UPDATE SET "holder" = EXCLUDED."holder", "expiresAt" = EXCLUDED."expiresAt"
          WHERE "DeploymentLease"."holder" = EXCLUDED."holder" OR "DeploymentLease"."expiresAt" < now()
          RETURNING "deploymentId"
        )
        SELECT d."id", d."platform"::text AS "platform", d."agentId", d."userId", d."secrets"->>'sealed' AS "sealed", d."cursor",
          md5(d."secrets"::text) AS "version"
        FROM claimed JOIN "Deployment" AS d ON d."id" = claimed."deploymentId"`;
      return rows.map((r) => ({ ...r, platform: r.platform as DeploymentPlatform }));
    },

    async release(holder, deploymentId) {
      await db.deploymentLease.deleteMany({ where: { holder, ...(deploymentId ? { deploymentId } : {}) } });
    },

    async receive(deploymentId, holder, from, to, messages) {
      const record = (batch: Recordable[]) =>
        db.$transaction(async (tx) => {
          const moved = await tx.$executeRaw`
            UPDATE "Deployment" AS d SET "cursor" = ${to}, "lastError" = NULL
            WHERE d."id" = ${deploymentId} AND d."running" AND d."valid" AND d."cursor" IS NOT DISTINCT FROM ${from}
              AND EXISTS (SELECT 1 FROM "DeploymentLease" AS l
                          WHERE l."deploymentId" = d."id" AND l."holder" = ${holder} AND l."expiresAt" > now())`;
          if (!moved) return false;
          if (batch.length)
            await tx.deploymentUpdate.createMany({ data: batch.map((m) => updateRow(deploymentId, m)), skipDuplicates: true });
          return true;
        });
      try {
        return (await record(messages)) ? { refused: [] } : null;
      } catch (e) {
        if (!messages.length || isDatabaseUnavailable(e)) throw e;
      }
      // The database refused something in the batch: each is tried alone, undone at once, and
      // those it refuses are kept as skipped, with nothing of what they carried.
      const refused: string[] = [];
      const batch: Recordable[] = [];
      for (const m of messages) {
        if (m.skipped || (await storable(db, deploymentId, m))) batch.push(m);
        else {
          refused.push(m.eventId);
          batch.push(skippedOnly(m));
        }
      }
      try {
        return (await record(batch)) ? { refused } : null;
      } catch (e) {
        if (isDatabaseUnavailable(e)) throw e;
        // Not even their ids are taken: the cursor moves past them all the same.
        return (await record([])) ? { refused: messages.map((m) => m.eventId) } : null;
      }
    },
  };
}

/** The row of a recorded update; one skipped keeps its ids and why, nothing of what it said. */
const updateRow = (deploymentId: string, m: Recordable) => ({
  id: newId(),
  deploymentId,
  eventId: m.eventId,
  conversationId: m.conversation.id,
  conversationTitle: m.conversation.title,
  conversationKind: m.conversation.kind,
  messageRef: m.messageRef,
  senderRef: m.sender.ref,
  senderName: m.sender.name,
  text: m.text,
  promptId: newId(),
  ...(m.skipped ? { status: 'skipped' as const, note: m.skipped } : {}),
});

const skippedOnly = (m: Recordable): Recordable => ({
  eventId: m.eventId,
  conversation: { id: '', title: '', kind: m.conversation.kind },
  messageRef: '',
  sender: { ref: '', name: '' },
  text: '',
  skipped: SKIPPED.refused,
});

class Undo extends Error {}

/** Whether the database takes the message's row: written in a transaction that is always undone. */
async function storable(db: Db, deploymentId: string, m: Recordable): Promise<boolean> {
  try {
    await db.$transaction(async (tx) => {
      await tx.deploymentUpdate.createMany({ data: [updateRow(deploymentId, m)], skipDuplicates: true });
      throw new Undo();
    });
  } catch (e) {
    if (e instanceof Undo) return true;
    if (isDatabaseUnavailable(e)) throw e;
  }
  return false;
}

/** Updates read and the prompts relayed for them, up to their answer. */
function updates(db: Db): Pick<DeploymentRuntimeStore, 'pending' | 'setReplyRefs' | 'finishUpdate' | 'retryUpdate'> {
  return {
    async pending(deploymentId) {
      const rows = await db.deploymentUpdate.findMany({ where: { deploymentId, status: 'received' }, orderBy: { seq: 'asc' } });
      return rows.map((r) => ({
        id: r.id,
        eventId: r.eventId,
        conversation: { id: r.conversationId, title: r.conversationTitle, kind: r.conversationKind === 'private' ? 'private' : 'group' },
        messageRef: r.messageRef,
        senderRef: r.senderRef,
        senderName: r.senderName,
        text: r.text,
        promptId: r.promptId,
        attempts: r.attempts,
        replyRefs: Array.isArray(r.replyRefs) ? r.replyRefs.map(String) : [],
      }));
    },

    async setReplyRefs(updateId, refs) {
      await db.deploymentUpdate.update({ where: { id: updateId }, data: { replyRefs: refs }, select: { id: true } });
    },

    async finishUpdate(updateId, status, note) {
      await db.deploymentUpdate.updateMany({ where: { id: updateId, status: 'received' }, data: { status, note } });
    },

    async retryUpdate(updateId, from, to) {
      const changed = await db.deploymentUpdate.updateMany({
        where: { id: updateId, promptId: from, status: 'received' },
        data: { promptId: to, attempts: { increment: 1 } },
      });
      return changed.count > 0;
    },
  };
}

/** A platform conversation's chat: its session, its message window, its notices, what it spent. */
function chats(db: Db): Pick<DeploymentRuntimeStore, 'chat' | 'setChatSession' | 'countMessage' | 'noticeDue' | 'spentToday'> {
  return {
    async chat(deploymentId, conversation) {
      return db.deploymentChat.upsert({
        where: { deploymentId_conversationId: { deploymentId, conversationId: conversation.id } },
        create: { deploymentId, conversationId: conversation.id, title: conversation.title },
        update: { title: conversation.title },
        select: { id: true, sessionId: true },
      });
    },

    async setChatSession(chatId, sessionId) {
      await db.deploymentChat.update({ where: { id: chatId }, data: { sessionId }, select: { id: true } });
    },

    async countMessage(chatId, limit, windowMs) {
      const [row] = await db.$queryRaw<{ count: number; reset: Date }[]>`
        WITH w AS (SELECT "windowStart" IS NULL OR "windowStart" <= now() - ${windowMs}::int * interval '1 millisecond' AS fresh
                   FROM "DeploymentChat" WHERE "id" = ${chatId})
        UPDATE "DeploymentChat" SET
          "windowStart" = CASE WHEN w.fresh THEN now() ELSE "windowStart" END,
          "windowCount" = CASE WHEN w.fresh THEN 1 ELSE "windowCount" + 1 END
        FROM w WHERE "id" = ${chatId}
        RETURNING "windowCount" AS "count", "windowStart" + ${windowMs}::int * interval '1 millisecond' AS "reset"`;
      return { allowed: (row?.count ?? 0) <= limit, resetAt: new Date(row?.reset ?? Date.now() + windowMs) };
    },

    async noticeDue(chatId, reason, until) {
      const changed = await db.$executeRaw`
        UPDATE "DeploymentChat" SET "notices" = jsonb_set("notices", ARRAY[${reason}::text], to_jsonb(${until.toISOString()}::text))
        WHERE "id" = ${chatId} AND ("notices"->>${reason}::text IS NULL OR ("notices"->>${reason}::text)::timestamptz <= now())`;
      return changed > 0;
    },

    async spentToday(deploymentId) {
      const [row] = await db.$queryRaw<{ spent: string }[]>`
        SELECT COALESCE(SUM("amount"), 0)::text AS "spent" FROM "DeploymentCharge"
        WHERE "deploymentId" = ${deploymentId} AND "day" = (now() AT TIME ZONE 'UTC')::date`;
      return Number(row?.spent ?? 0);
    },
  };
}

/** The deployment's own row as its runner reads and marks it. */
/** A deployment that stopped running, for its owner's webhooks: why, in a word and in full (the deployment is added as REST shows it). */
const stoppedEvent = (
  row: { id: string; userId: string; agentId: string; platform: string },
  reason: 'secrets_refused' | 'secrets_unopenable' | 'cap',
  detail: string,
): WebhookEventInput => ({
  userId: row.userId,
  type: 'deployment.stopped',
  data: { deployment_id: row.id, agent_id: row.agentId, platform: row.platform, reason, detail },
});

function deploymentState(db: Db): Pick<DeploymentRuntimeStore, 'relayContext' | 'invalidate' | 'noteError' | 'cannotOpen' | 'capReached'> {
  return {
    async relayContext(deploymentId) {
      const row = await db.deployment.findUnique({
        where: { id: deploymentId },
        select: { running: true, valid: true, userId: true, agentId: true, platform: true, config: true },
      });
      return row ? { ...row, config: (row.config ?? {}) as DeploymentConfig } : null;
    },

    invalidate: (deploymentId, reason) =>
      db.$transaction(async (tx) => {
        const [row] = await tx.deployment.updateManyAndReturn({
          where: { id: deploymentId },
          data: { valid: false, running: false, lastError: reason },
          select: { id: true, userId: true, agentId: true, platform: true },
        });
        if (row) await recordWebhookEvent(tx, stoppedEvent(row, 'secrets_refused', reason));
      }),

    cannotOpen: (deploymentId, error) =>
      db.$transaction(async (tx) => {
        // Told once, when it first cannot run: tries again after a cool-down write nothing new.
        const [row] = await tx.deployment.updateManyAndReturn({
          where: { id: deploymentId, OR: [{ lastError: null }, { lastError: { not: error } }] },
          data: { lastError: error },
          select: { id: true, userId: true, agentId: true, platform: true },
        });
        if (row) await recordWebhookEvent(tx, stoppedEvent(row, 'secrets_unopenable', error));
      }),

    capReached: (deploymentId, until, detail) =>
      db.$transaction(async (tx) => {
        // Once a period, whichever chat or instance meets the cap first: the others update nothing.
        const [row] = await tx.deployment.updateManyAndReturn({
          where: { id: deploymentId, OR: [{ capStoppedUntil: null }, { capStoppedUntil: { lt: until } }] },
          data: { capStoppedUntil: until },
          select: { id: true, userId: true, agentId: true, platform: true },
        });
        if (row) await recordWebhookEvent(tx, stoppedEvent(row, 'cap', detail));
      }),

    async noteError(deploymentId, error) {
      // Written only when it changes: a fault retried every second costs no write each time.
      await db.$executeRaw`UPDATE "Deployment" SET "lastError" = ${error} WHERE "id" = ${deploymentId} AND "lastError" IS DISTINCT FROM ${error}`;
    },
  };
}

/**
 * The sender's user: made with its DeploymentSender row in one transaction, renamed when the
 * person's name changed. Two runners meeting the same person at once: the second reads the first's.
 */
async function senderOf(db: Db, platform: DeploymentPlatform, ref: string, name: string): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    const known = await db.deploymentSender.findUnique({ where: { platform_externalId: { platform, externalId: ref } } });
    try {
      if (known) {
        if (known.name !== name)
          await db.$transaction(async (tx) => {
            await tx.deploymentSender.update({ where: { userId: known.userId }, data: { name } });
            await renameCreator(tx, known.userId, { username: senderUsername(platform, ref, name) });
          });
        return known.userId;
      }
      return await db.$transaction(async (tx) => {
        const user = await addCreator(tx, { username: senderUsername(platform, ref, name) });
        await tx.deploymentSender.create({ data: { userId: user.id, platform, externalId: ref, name } });
        return user.id;
      });
    } catch (e) {
      if (!isUniqueViolation(e) || attempt > 0) throw e;
    }
  }
}
