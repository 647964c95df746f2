import type { Db } from '../../src/db/database.ts';

/** The users whose balances differ from the sums of their ledger rows: none, when manna moved only with a row per move. */
export const ledgerMismatches = (db: Db) =>
  db.$queryRaw`SELECT u."username" FROM "User" u
    WHERE u."subscriptionBalance" <> (SELECT coalesce(sum("amount"), 0) FROM "MannaLedger" WHERE "userId" = u."id" AND "kind" = 'subscription')
       OR u."foreverBalance" <> (SELECT coalesce(sum("amount"), 0) FROM "MannaLedger" WHERE "userId" = u."id" AND "kind" = 'forever')`;
