import { useCallback, useEffect, useState } from 'preact/hooks';
import { type Problem, problemOf, request } from './api.ts';

/** The GraphQL this view sends. */
const MY_WEBHOOKS = `query MyWebhooks { me { webhooks {
  id url description eventTypes enabled disabledReason
  deliveries(first: 10) { rawId eventType status attempts statusCode error nextAttemptAt lastAttemptAt }
} } }`;
const CREATE_WEBHOOK = `mutation CreateWebhook($input: CreateWebhookInput!) { createWebhook(input: $input) { secret webhook { id } } }`;
const SET_WEBHOOK_ENABLED = `mutation SetWebhookEnabled($id: ID!, $input: UpdateWebhookInput!) { updateWebhook(id: $id, input: $input) { id enabled } }`;
const TEST_WEBHOOK = `mutation TestWebhook($id: ID!) { testWebhook(id: $id) { rawId } }`;
const ROTATE_WEBHOOK = `mutation RotateWebhook($id: ID!) { rotateWebhookSecret(id: $id) { secret } }`;
const REDELIVER_WEBHOOK = `mutation RedeliverWebhook($id: ID!, $deliveryId: ID!) { redeliverWebhook(id: $id, deliveryId: $deliveryId) { rawId } }`;
const DELETE_WEBHOOK = `mutation DeleteWebhook($id: ID!) { deleteWebhook(id: $id) }`;

/** What an endpoint can be told, as GraphQL names them. */
const TYPES = [
  'REPLY_COMPLETED',
  'REPLY_FAILED',
  'TRIGGER_RUN_COMPLETED',
  'TRIGGER_RUN_FAILED',
  'TASK_COMPLETED',
  'TASK_FAILED',
  'TASK_CANCELLED',
  'DEPLOYMENT_STOPPED',
  'AUTONOMY_STOPPED',
  'WEBHOOK_TEST',
];

interface Delivery {
  rawId: string;
  eventType: string;
  status: string;
  attempts: number;
  statusCode: number | null;
  error: string | null;
  nextAttemptAt: string | null;
  lastAttemptAt: string | null;
}
interface Webhook {
  id: string;
  url: string;
  description: string;
  eventTypes: string[];
  enabled: boolean;
  disabledReason: string | null;
  deliveries: Delivery[];
}

/** One delivery of the log: its event, how its last try went, and a button to send it again. */
function DeliveryRow({ delivery, onRedeliver }: { delivery: Delivery; onRedeliver: () => void }) {
  const outcome = delivery.statusCode !== null ? `HTTP ${delivery.statusCode}` : (delivery.error ?? 'not tried yet');
  return (
    <li data-delivery={delivery.rawId} data-status={delivery.status}>
      {delivery.eventType} · {delivery.status} · {delivery.attempts} {delivery.attempts === 1 ? 'try' : 'tries'} · {outcome}
      {delivery.nextAttemptAt && <span class="muted"> · next {new Date(delivery.nextAttemptAt).toLocaleTimeString()}</span>}{' '}
      <button type="button" class="redeliver" onClick={onRedeliver}>
        Send again
      </button>
    </li>
  );
}

/** Your webhook endpoints: make one (its secret shown once), test it, read its log, send again, turn it off. */
export function WebhooksView({ apiKey, onProblem }: { apiKey: string; onProblem: (p: Problem) => void }) {
  const [webhooks, setWebhooks] = useState<Webhook[]>([]);
  const [url, setUrl] = useState('');
  const [types, setTypes] = useState<string[]>(['WEBHOOK_TEST']);
  const [secret, setSecret] = useState<string | null>(null);
  const [loaded, setLoaded] = useState(false);

  const load = useCallback(async () => {
    try {
      const data = await request<{ me: { webhooks: Webhook[] } }>(apiKey, MY_WEBHOOKS);
      setWebhooks(data.me.webhooks);
      setLoaded(true);
    } catch (e) {
      onProblem(problemOf(e));
    }
  }, [apiKey]);
  useEffect(() => {
    void load();
  }, [load]);

  const act = async (query: string, variables: Record<string, unknown>) => {
    try {
      const data = await request<Record<string, { secret?: string } | unknown>>(apiKey, query, variables);
      const shown = Object.values(data)[0] as { secret?: string } | null;
      if (shown?.secret) setSecret(shown.secret);
      await load();
    } catch (e) {
      onProblem(problemOf(e));
    }
  };

  const create = async (e: Event) => {
    e.preventDefault();
    await act(CREATE_WEBHOOK, { input: { url, eventTypes: types } });
    setUrl('');
  };

  return (
    <section class="webhooks">
      <h2>Webhooks</h2>
      <form class="create-webhook" onSubmit={create}>
        <input
          name="webhook-url"
          placeholder="https://example.com/hooks/parley"
          value={url}
          onInput={(e) => setUrl(e.currentTarget.value)}
        />
        <fieldset>
          {TYPES.map((type) => (
            <label key={type}>
              <input
                type="checkbox"
                name={type}
                checked={types.includes(type)}
                onChange={(e) => setTypes((t) => (e.currentTarget.checked ? [...t, type] : t.filter((x) => x !== type)))}
              />{' '}
              {type.toLowerCase().replaceAll('_', '.')}
            </label>
          ))}
        </fieldset>
        <button type="submit" disabled={!url || !types.length}>
          Add endpoint
        </button>
      </form>
      {secret && (
        <p class="webhook-secret">
          Its signing secret, shown this once: <code>{secret}</code>
        </p>
      )}
      {loaded && !webhooks.length && <p class="hint">No endpoints yet.</p>}
      <ul class="webhook-list">
        {webhooks.map((w) => (
          <li key={w.id} data-webhook={w.url} data-enabled={String(w.enabled)}>
            <strong>{w.url}</strong> <span class="muted">{w.eventTypes.map((t) => t.toLowerCase().replaceAll('_', '.')).join(', ')}</span>
            {w.disabledReason && <p class="muted">Turned off: {w.disabledReason}</p>}
            <div>
              <button type="button" class="test" onClick={() => act(TEST_WEBHOOK, { id: w.id })}>
                Send a test
              </button>{' '}
              <button type="button" class="toggle" onClick={() => act(SET_WEBHOOK_ENABLED, { id: w.id, input: { enabled: !w.enabled } })}>
                {w.enabled ? 'Turn off' : 'Turn on'}
              </button>{' '}
              <button type="button" class="rotate" onClick={() => act(ROTATE_WEBHOOK, { id: w.id })}>
                New secret
              </button>{' '}
              <button type="button" class="delete" onClick={() => act(DELETE_WEBHOOK, { id: w.id })}>
                Delete
              </button>{' '}
              <button type="button" class="refresh" onClick={() => void load()}>
                Refresh log
              </button>
            </div>
            <ul class="deliveries">
              {w.deliveries.map((d) => (
                <DeliveryRow key={d.rawId} delivery={d} onRedeliver={() => act(REDELIVER_WEBHOOK, { id: w.id, deliveryId: d.rawId })} />
              ))}
            </ul>
          </li>
        ))}
      </ul>
    </section>
  );
}
