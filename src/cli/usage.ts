/** Help texts, kept apart from the commands so `--help` loads nothing else. */
export const usage = {
  main: `Usage: parley <command> [options]

Commands:
  serve                      start the service (same as npm start)
  migrate                    apply database migrations and exit
  keys create <username>     create the user if missing and print a new API key (shown once)
  demo                       load the demo data set (idempotent) and print its manifest
  creations import <file>    import creations from a JSON-lines file (resumable)
  creations reembed          embed creations again with the configured embedding provider
  manna grant <user> <amount>  add manna to a user's balance (a ledger row records it)
  backup <file>              write a backup of the embedded database, also while it serves
  restore <file>             restore a backup into DATA_DIR (new or stopped)
  db copy --to <url>         copy the embedded database into PostgreSQL
  secrets rotate|reseal      seal deployments' secrets under a new key (docs/deployments.md)

Run "parley <command> --help" for a command's options. Settings come from the environment:
DATABASE_URL (else embedded PGlite in DATA_DIR, default ./data), PORT, HOST, and more;
"parley serve --help" lists every one, docs/configuration.md explains them.`,
  serve: `Usage: parley serve\n\nStarts the service on HOST:PORT (default 127.0.0.1:4000), applying migrations first.`,
  migrate: `Usage: parley migrate\n\nApplies pending migrations from prisma/migrations to the configured database and exits.`,
  keys: `Usage: parley keys create <username> [--json]\n\nCreates <username> if it does not exist and prints a new API key for it.\nThe key is shown only this once; only its hash is stored.\n\n  --json   print {"userId","username","apiKey"} as JSON`,
  manna: `Usage: parley manna grant <username> <amount> [--subscription] [--json]\n\nAdds <amount> of manna (up to 4 decimals) to the user's balance, with a ledger row.\nForever manna (purchased, never expires) unless --subscription.\n\n  --subscription   add subscription manna (spent first, granted per billing period)\n  --json           print {"ledgerId","amount","kind","subscriptionBalance","foreverBalance"}`,
  secrets: `Usage: parley secrets rotate [--json]
       parley secrets reseal [--json]

rotate: with the key generated into DATA_DIR/secrets.key (no SECRETS_KEY), makes a new key,
seals every deployment's secrets (bot tokens) again under it, and forgets the old key once none
needs it. With SECRETS_KEY it refuses and says what to do instead.

reseal: seals again, under SECRETS_KEY, every secret still sealed under a key listed in
SECRETS_PREVIOUS_KEYS. To rotate SECRETS_KEY: set the new key in SECRETS_KEY and the old one in
SECRETS_PREVIOUS_KEYS on every instance, restart them, run this, then remove the old key.

Both show their progress on stderr, then print how many were sealed again, how many already
were, and the ids of deployments no key opens (deploy those again with their token). Running
either again does nothing twice. Stopped partway (a crash), every deployment still opens under
the old key or the new one, both still kept: run the same command again to finish.

  --json   print {"resealed","current","unreadable"} as JSON`,
  backup: `Usage: parley backup <file> [--json]

Writes a backup of the embedded database in DATA_DIR (and the media files in MEDIA_DIR) to
<file>: through the running service if there is one, which pauses for a copy of its files, or
directly while it is stopped. Everything acknowledged before the backup began is in it. The
file appears only once complete. It says what it leaves out that a restore needs: the key
deployments' secrets are sealed with (keep secrets.key apart). See docs/operations.md.

  --json   print the summary (tables with their row counts and checksums) as JSON`,
  restore: `Usage: parley restore <file> [--force] [--json]

Restores a backup into DATA_DIR, which must not be in use; it is checked whole first (a
truncated file, another program's, a decompression bomb, or one from a newer parley is refused
before anything changes). Media files go to MEDIA_DIR once all is checked, never over a file.
It says whether DATA_DIR holds the key the restored deployments need.

  --force   replace the database DATA_DIR holds (refused otherwise when it has data)
  --json    print the summary as JSON`,
  db: `Usage: parley db copy --to <postgres url> [--force] [--without-pgvector] [--json]

Copies everything in the embedded database (DATA_DIR, stopped) into the PostgreSQL database at
<url>, migrating it first; then start with DATABASE_URL=<url>. Run it again after an
interruption to finish the copy. Prints each table's row count and checksum on both sides,
and what the service on PostgreSQL needs beside it (SECRETS_KEY, MEDIA_DIR, PUBLIC_URL).

  --force              replace what the target holds (refused otherwise when it has parley data)
  --without-pgvector   copy into a server without pgvector: embeddings as real[], exact search
  --json               print the per-table counts and checksums as JSON`,
  demo: `Usage: parley demo [--json]\n\nLoads the demo data set (users alice and bob, agents, deployments, triggers, a concept,\nmodels, 240 creations, sessions and shares). Running it again adds nothing twice.\nA fresh API key for each demo user is printed on every run.\n\n  --json   print the manifest as one JSON object on stdout`,
  creations: `Usage: parley creations import <file.jsonl> [--json]
       parley creations reembed [--all]

import: one creation per line, as JSON:
  {"user": "alice", "name": "Lighthouse at dusk", "tool": "flux_dev", "url": "https://...",
   "id": "...", "agent": "muse", "thumbnail": "https://...", "filename": "...", "args": {"prompt": "..."},
   "mediaAttributes": {...}, "public": true, "createdAt": "2026-01-01T00:00:00Z",
   "embedding": [768 numbers], "embeddingProvider": "..."}
user, name, tool and url are required; user and agent are usernames that must exist. Lines
without an embedding (or with one from another provider) are embedded by the configured
provider, in batches. A line that cannot be imported is reported with its reason and skipped.
Lines are identified by "id", or else by their text, so running the same file again (after an
interrupt, say) resumes: lines already imported are skipped, never doubled.

  --json   print the summary, with every rejected line, as one JSON object

reembed: embeds again every creation whose embedding is missing or was made by another
provider than the configured one (needed after changing EMBEDDINGS_URL/EMBEDDINGS_MODEL:
search compares only vectors of the active provider). Resumable: run it again after an interrupt.

  --all    embed every creation again, whatever made its embedding`,
};

/** `serve --help` also lists every setting; their declarations (and zod) load only for it. */
export async function serveUsage(): Promise<string> {
  const [{ settings }, { helpText }] = await Promise.all([import('../config.ts'), import('../settings.ts')]);
  return `${usage.serve}\n\nSettings, from the environment (an empty value counts as unset):\n\n${helpText(settings)}`;
}
