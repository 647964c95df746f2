/**
 * The key ids deployments' and webhooks' secrets are sealed with, and how many of each (read from
 * the database at start, and by backup, restore and db copy).
 */
export interface SealedKey {
  keyId: string;
  deployments: number;
  webhooks: number;
}

/**
 * The statement that counts them, for a database that has the webhooks' table or not (one not
 * migrated yet). The key id is the second part of the sealed text (`v1.<key id>.…`): no secret.
 * A webhook's secret before a rotation counts while it still signs.
 */
export function sealedKeysSql(withWebhooks: boolean): string {
  const webhooks = withWebhooks
    ? `UNION ALL SELECT "id", split_part("secret", '.', 2), 'webhook' FROM "Webhook"
       UNION ALL SELECT "id", split_part("previousSecret", '.', 2), 'webhook' FROM "Webhook"
       WHERE "previousSecret" IS NOT NULL AND "previousUntil" > now()`
    : '';
  return `SELECT "keyId", count(*) FILTER (WHERE "kind" = 'deployment')::int AS "deployments",
      count(DISTINCT "id") FILTER (WHERE "kind" = 'webhook')::int AS "webhooks"
    FROM (SELECT "id", split_part("secrets"->>'sealed', '.', 2) AS "keyId", 'deployment' AS "kind" FROM "Deployment"
          WHERE "secrets"->>'sealed' IS NOT NULL ${webhooks}) AS "sealed"
    GROUP BY 1 ORDER BY 1`;
}

const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

/** "2 deployments and 1 webhook endpoint": what a count of sealed secrets is of. */
export const sealedWhat = (s: Pick<SealedKey, 'deployments' | 'webhooks'>) =>
  [s.deployments ? plural(s.deployments, 'deployment') : '', s.webhooks ? plural(s.webhooks, 'webhook endpoint') : '']
    .filter(Boolean)
    .join(' and ');
