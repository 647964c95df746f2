-- Links to the service's own media files were stored absolute, with the address the service had
-- when each was made (http://127.0.0.1:4000/media/<id>.png): after a restore, a copy to
-- PostgreSQL or a new PUBLIC_URL they pointed at the old address. They are stored relative to the
-- service now (/media/<id>.png) and made absolute when shown, against where it is served from.
--
-- A creation's link is the service's own when it names a file under /media/ called after the
-- creation (<id>.<ext>, or <id>-<suffix>.<ext> for a thumbnail) and the creation was made by the
-- service: by a tool run (it has a task), or named as the service names its files (its filename
-- is that file's). Other links (imported creations, tools on other hosts) stay as they are.
CREATE TEMPORARY TABLE "parley_moved_media_links" ("old" TEXT PRIMARY KEY, "new" TEXT NOT NULL);

INSERT INTO "parley_moved_media_links" ("old", "new")
SELECT l."link", substring(l."link" from '^https?://[^/]+(/media/[^/]+)$')
FROM "Creation" c
CROSS JOIN LATERAL (VALUES (c."url"), (c."thumbnail")) AS l("link")
WHERE l."link" ~ '^https?://[^/]+/media/[A-Za-z0-9][A-Za-z0-9_-]*\.[a-z0-9]{2,5}$'
  AND (starts_with(substring(l."link" from '/media/([^/]+)$'), c."id" || '.')
       OR starts_with(substring(l."link" from '/media/([^/]+)$'), c."id" || '-'))
  AND (c."taskId" IS NOT NULL OR c."filename" = substring(c."url" from '/media/([^/]+)$'))
ON CONFLICT ("old") DO NOTHING;

UPDATE "Creation" c SET "url" = m."new" FROM "parley_moved_media_links" m WHERE c."url" = m."old";
UPDATE "Creation" c SET "thumbnail" = m."new" FROM "parley_moved_media_links" m WHERE c."thumbnail" = m."old";

-- Tools' results (a task's, a reply's tool call's) repeat those links, at any depth: images a
-- painting tool made, creations a search found. The same links are made relative there, and no
-- other string is changed.
CREATE FUNCTION pg_temp.relative_media_links(value jsonb) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
  made jsonb;
BEGIN
  IF jsonb_typeof(value) = 'array' THEN
    SELECT coalesce(jsonb_agg(pg_temp.relative_media_links(e.item) ORDER BY e.n), '[]'::jsonb) INTO made
    FROM jsonb_array_elements(value) WITH ORDINALITY AS e(item, n);
    RETURN made;
  ELSIF jsonb_typeof(value) = 'object' THEN
    SELECT coalesce(jsonb_object_agg(e.key, pg_temp.relative_media_links(e.value)), '{}'::jsonb) INTO made FROM jsonb_each(value) AS e;
    RETURN made;
  ELSIF jsonb_typeof(value) = 'string' THEN
    SELECT to_jsonb(m."new") INTO made FROM "parley_moved_media_links" m WHERE m."old" = value #>> '{}';
    RETURN coalesce(made, value);
  END IF;
  RETURN value;
END
$$;

UPDATE "Task" SET "result" = pg_temp.relative_media_links("result")
WHERE "result" IS NOT NULL AND "result"::text ~ 'https?://[^/"]+/media/';

DROP FUNCTION pg_temp.relative_media_links(jsonb);
DROP TABLE "parley_moved_media_links";
