/**
 * The key ids deployments', webhooks' and MCP servers' secrets are sealed with, and how many of
 * each (read from the database at start, and by backup, restore and db copy).
 */
export interface SealedKey {
  keyId: string;
  deployments: number;
  webhooks: number;
  mcpServers: number;
}

/** Which of the later tables holding sealed secrets a database has (one not migrated yet lacks them). */
export interface SealedTables {
  webhooks: boolean;
  mcpServers: boolean;
}

/** The statement telling which of `SealedTables` are there, as one row of two booleans. */
export const sealedTablesSql = `SELECT (to_regclass('"Webhook"') IS NOT NULL) AS "webhooks", (to_regclass('"McpServer"') IS NOT NULL) AS "mcpServers"`;

/**
 * The statement that counts them, for a database with the tables `present`. The key id is the
 * second part of the sealed text (`v1.<key id>.…`): no secret. A webhook's secret before a
 * rotation counts while it still signs.
 */
export function sealedKeysSql(present: SealedTables): string {
  const webhooks = present.webhooks
    ? `UNION ALL SELECT "id", split_part("secret", '.', 2), 'webhook' FROM "Webhook"
       UNION ALL SELECT "id", split_part("previousSecret", '.', 2), 'webhook' FROM "Webhook"
       WHERE "previousSecret" IS NOT NULL AND "previousUntil" > now()`
    : '';
  const mcpServers = present.mcpServers
    ? `UNION ALL SELECT "id", split_part("authorization", '.', 2), 'mcp' FROM "McpServer" WHERE "authorization" IS NOT NULL`
    : '';
  return `SELECT "keyId", count(*) FILTER (WHERE "kind" = 'deployment')::int AS "deployments",
      count(DISTINCT "id") FILTER (WHERE "kind" = 'webhook')::int AS "webhooks",
      count(*) FILTER (WHERE "kind" = 'mcp')::int AS "mcpServers"
    FROM (SELECT "id", split_part("secrets"->>'sealed', '.', 2) AS "keyId", 'deployment' AS "kind" FROM "Deployment"
          WHERE "secrets"->>'sealed' IS NOT NULL ${webhooks} ${mcpServers}) AS "sealed"
    GROUP BY 1 ORDER BY 1`;
}

const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

/** "2 deployments, 1 webhook endpoint and 1 MCP server": what a count of sealed secrets is of. */
export function sealedWhat(s: Omit<SealedKey, 'keyId'>): string {
  const parts = [
    s.deployments ? plural(s.deployments, 'deployment') : '',
    s.webhooks ? plural(s.webhooks, 'webhook endpoint') : '',
    s.mcpServers ? plural(s.mcpServers, 'MCP server') : '',
  ].filter(Boolean);
  return parts.length > 1 ? `${parts.slice(0, -1).join(', ')} and ${parts.at(-1)}` : (parts[0] ?? '');
}
