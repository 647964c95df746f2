import type { Config } from '../../config.ts';
import type { Sql } from '../../db/sql.ts';
import { type SealedKey, sealedKeysSql, sealedTablesSql, sealedWhat } from '../../domain/deployments/index.ts';
import { keyIdOf, readKeyFile } from '../../secrets/keyring.ts';

/**
 * What data moved by `backup`/`restore` or `db copy` needs beside it, said by those commands when
 * it does: the key deployments' and webhooks' secrets are sealed with (never in a backup or a copy), the media
 * files (MEDIA_DIR), and the public address media links resolve against (PUBLIC_URL).
 */

/** The key ids deployments' and webhooks' secrets are sealed with in the database `sql` reads, and how many of each. */
export async function sealedKeysIn(sql: Sql): Promise<SealedKey[]> {
  const [[webhooks, mcpServers]] = (await sql.rows(sealedTablesSql)) as [[unknown, unknown]];
  // The commands' SQL reads values as PostgreSQL prints them: a boolean is 't' or 'f'.
  const yes = (v: unknown) => v === true || v === 't' || v === 'true';
  const present = { webhooks: yes(webhooks), mcpServers: yes(mcpServers) };
  const rows = (await sql.rows(sealedKeysSql(present))) as [string, ...(string | number)[]][];
  return rows.map(([keyId, d, w, m]) => ({ keyId, deployments: Number(d), webhooks: Number(w), mcpServers: Number(m) }));
}

/** Where a command's configuration takes the key from, and the ids of the keys there (none: no key file yet). */
export async function keysHere(config: Pick<Config, 'secrets'>): Promise<{ where: string; keyIds: string[] }> {
  const { key, previous, keyFile } = config.secrets;
  if (key) return { where: 'SECRETS_KEY', keyIds: [key, ...previous].map(keyIdOf) };
  const warn = (_: unknown, message?: string) => console.error(message);
  const kept = keyFile ? await readKeyFile(keyFile, { warn }) : null;
  return { where: keyFile ?? 'SECRETS_KEY', keyIds: (kept ?? []).map(keyIdOf) };
}

const ids = (sealed: SealedKey[]) => sealed.map((s) => s.keyId).join(', ');
/** What the secrets of `sealed` are of, all keys together: "2 deployments and 1 webhook endpoint". */
const owners = (sealed: SealedKey[]) =>
  sealedWhat({
    deployments: sealed.reduce((n, s) => n + s.deployments, 0),
    webhooks: sealed.reduce((n, s) => n + s.webhooks, 0),
    mcpServers: sealed.reduce((n, s) => n + s.mcpServers, 0),
  });

/** What a backup leaves out and a restore will need. */
export async function carryFromBackup(config: Config, sealed: SealedKey[], mediaFiles: number): Promise<string[]> {
  const lines: string[] = [];
  if (sealed.length) {
    const { where } = await keysHere(config);
    lines.push(
      `Not in it: the key the secrets of ${owners(sealed)} are sealed with (key id ${ids(sealed)}, ${where === 'SECRETS_KEY' ? 'in SECRETS_KEY' : `in ${where}`}). ` +
        'Keep a copy of it apart from the backups: where this is restored, put it in the new DATA_DIR as secrets.key (mode 0600) or set SECRETS_KEY to it, or those do not run (a webhook endpoint signs nothing).',
    );
  }
  if (mediaFiles && config.publicUrl) {
    lines.push(
      `Media links follow the service: where this is restored, set PUBLIC_URL to the address clients reach it at (here ${config.publicUrl}).`,
    );
  }
  return lines;
}

/** What a restored data directory still needs before its service starts. */
export async function carryIntoRestore(config: Config, sealed: SealedKey[]): Promise<string[]> {
  if (!sealed.length) return [];
  const { where, keyIds } = await keysHere(config);
  const missing = sealed.filter((s) => !keyIds.includes(s.keyId));
  if (!missing.length) return [`The secrets of ${owners(sealed)} open with the key in ${where}.`];
  const held = where === 'SECRETS_KEY' ? 'SECRETS_KEY is not' : keyIds.length ? `${where} does not hold` : `there is no ${where} with`;
  return [
    `The secrets of ${owners(missing)} are sealed with key id ${ids(missing)}, and ${held} that key: before starting, copy the secrets.key ` +
      `of the data directory the backup was made from to ${config.secrets.keyFile ?? 'the data directory'} (mode 0600), or set SECRETS_KEY to its first line. Without it they do not run.`,
  ];
}

/** What the service on PostgreSQL needs from the embedded one. */
export async function carryToPostgres(config: Config, sealed: SealedKey[], mediaFiles: number): Promise<string[]> {
  const lines: string[] = [];
  if (sealed.length) {
    const { where, keyIds } = await keysHere(config);
    const missing = sealed.filter((s) => !keyIds.includes(s.keyId));
    lines.push(
      missing.length
        ? `The secrets of ${owners(missing)} are sealed with key id ${ids(missing)}, which ${where} does not hold: start PostgreSQL's instances with SECRETS_KEY set to that key, or deploy them again with their tokens.`
        : `The secrets of ${owners(sealed)} are sealed with key id ${ids(sealed)}: start every instance on PostgreSQL with SECRETS_KEY set to ${where === 'SECRETS_KEY' ? 'the same key' : `the key in ${where} (its first line)`}, or they do not run.`,
    );
  }
  if (mediaFiles) {
    lines.push(
      `${mediaFiles} media files stay in ${config.mediaDir}: give the service on PostgreSQL that MEDIA_DIR (or a copy of it), on storage every instance reaches.`,
    );
  }
  if (config.publicUrl)
    lines.push(`Media links follow the service: set PUBLIC_URL there to the address clients reach it at (here ${config.publicUrl}).`);
  return lines;
}
