/** Help texts, kept apart from the commands so `--help` loads nothing else. */
export const usage = {
  main: `Usage: parley <command> [options]

Commands:
  serve                      start the service (same as npm start)
  migrate                    apply database migrations and exit
  keys create <username>     create the user if missing and print a new API key (shown once)
  demo                       load the demo data set (idempotent) and print its manifest

Run "parley <command> --help" for a command's options. Configuration comes from the
environment: DATABASE_URL (else embedded PGlite in DATA_DIR, default ./data), PORT, HOST.`,
  serve: `Usage: parley serve\n\nStarts the service on HOST:PORT (default 127.0.0.1:4000), applying migrations first.`,
  migrate: `Usage: parley migrate\n\nApplies pending migrations from prisma/migrations to the configured database and exits.`,
  keys: `Usage: parley keys create <username> [--json]\n\nCreates <username> if it does not exist and prints a new API key for it.\nThe key is shown only this once; only its hash is stored.\n\n  --json   print {"userId","username","apiKey"} as JSON`,
  demo: `Usage: parley demo [--json]\n\nLoads the demo data set (users alice and bob, agents, deployments, triggers, a concept,\nmodels, 240 creations, sessions and shares). Running it again adds nothing twice.\nA fresh API key for each demo user is printed on every run.\n\n  --json   print the manifest as one JSON object on stdout`,
};
