import { isDomainError } from '../domain/core/errors.ts';
import type { Viewer } from '../domain/core/viewer.ts';
import type { Services } from '../domain/services.ts';
import type { WebhookEventInput, WebhookPayloads } from '../domain/webhooks/index.ts';
import { toRestDeployment } from './deployments.ts';
import { senderDirectory } from './senders.ts';
import { restSessionInclude, toRestMessage, toRestSession } from './session-shapes.ts';
import { restTaskQuery, toRestTask } from './task-shapes.ts';
import { type RestTriggerRow, restTriggerQuery, toRestTrigger, toRestTriggerRun } from './trigger-shapes.ts';
import { toRestWebhook } from './webhook-shapes.ts';

type Ids = Record<string, unknown>;
/** The objects an event's ids name, each as its `GET` answers the viewer, under the keys `data` gives them. */
type Objects = (services: Services, viewer: Viewer, ids: Ids, senders: ReturnType<typeof senderDirectory>) => Promise<Ids>;

const id = (ids: Ids, key: string) => String(ids[key]);

/** Deleted before the first try (its session, its trigger, the endpoint itself): null, the ids still say what it was. */
async function orNull<T>(read: () => Promise<T>): Promise<T | null> {
  try {
    return await read();
  } catch (e) {
    if (isDomainError(e) && e.code === 'NOT_FOUND') return null;
    throw e;
  }
}

const reply: Objects = async (services, viewer, ids, senders) => ({
  message: await orNull(async () => {
    const m = await services.sessions.message(viewer, id(ids, 'message_id'));
    return toRestMessage(m, await senders.lookup([m.senderId]), services.links);
  }),
});

const triggerRun: Objects = async (services, viewer, ids) => ({
  run: await orNull(async () => toRestTriggerRun(await services.triggers.run(viewer, id(ids, 'trigger_id'), id(ids, 'run_id')))),
  trigger: await orNull(async () =>
    toRestTrigger((await services.triggers.get(viewer, id(ids, 'trigger_id'), restTriggerQuery)) as RestTriggerRow),
  ),
});

const task: Objects = async (services, viewer, ids) => ({
  task: await orNull(async () =>
    toRestTask(viewer, services.tools, await services.tasks.get(viewer, id(ids, 'task_id'), restTaskQuery), services.links),
  ),
});

const objects: Record<WebhookEventInput['type'], Objects> = {
  'reply.completed': reply,
  'reply.failed': reply,
  'trigger.run.completed': triggerRun,
  'trigger.run.failed': triggerRun,
  'task.completed': task,
  'task.failed': task,
  'task.cancelled': task,
  'deployment.stopped': async (services, viewer, ids) => ({
    deployment: await orNull(async () => toRestDeployment(await services.deployments.get(viewer, id(ids, 'deployment_id')))),
  }),
  'autonomy.stopped': async (services, viewer, ids) => ({
    session: await orNull(async () =>
      toRestSession(await services.sessions.get(viewer, id(ids, 'session_id'), { include: restSessionInclude })),
    ),
  }),
  'webhook.test': async (services, viewer, ids) => ({
    webhook: await orNull(async () => toRestWebhook(await services.webhooks.get(viewer, id(ids, 'webhook_id')))),
  }),
};

/**
 * Webhooks' payloads as REST shows them (`docs/webhooks.md`): the ids an event recorded, and the
 * objects they name made by the same mappings the `GET` routes use, as the endpoint's owner reads
 * them (media links absolute against where clients reach the service). The domain's
 * `WebhookPayloads`, handed to the deliveries by the composition root.
 */
export function restWebhookPayloads(services: Services): WebhookPayloads {
  const senders = senderDirectory(services.creators);
  return {
    async render(event) {
      const viewer: Viewer = { id: event.userId };
      return { ...event.data, ...(await objects[event.type](services, viewer, event.data, senders)) };
    },
  };
}
