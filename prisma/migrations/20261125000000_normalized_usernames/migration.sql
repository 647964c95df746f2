-- Usernames (and so agent keys, which are usernames) are unique after Unicode NFKC
-- normalization and case folding, so `alice`, `ALICE` and `ａｌｉｃｅ` are one name. Prisma's
-- schema cannot express an index on an expression; this one is kept here only.
--
-- Existing names that clash would make the index fail: list them all and stop, so an operator
-- decides which one keeps the name, rather than renaming anyone silently.
DO $$
DECLARE
  clashes text;
BEGIN
  SELECT string_agg(names, '; ' ORDER BY names) INTO clashes
  FROM (
    SELECT string_agg(format('%s (%s %s)', username, type, id), ', ' ORDER BY username, id) AS names
    FROM "User"
    GROUP BY lower(normalize(username, NFKC))
    HAVING count(*) > 1
  ) AS clash;
  IF clashes IS NOT NULL THEN
    RAISE EXCEPTION 'Usernames must be unique regardless of case and Unicode form, and these clash: %', clashes
      USING HINT = 'Rename all but one in each group (UPDATE "User" SET username = ... WHERE id = ...), then migrate again.';
  END IF;
END $$;

-- CreateIndex
CREATE UNIQUE INDEX "User_username_normalized_key" ON "User" (lower(normalize("username", NFKC)));
