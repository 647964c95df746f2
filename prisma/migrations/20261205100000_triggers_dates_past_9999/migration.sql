-- Triggers made with a date past the year 9999, before such dates were refused: the driver reads
-- them back as invalid dates (GraphQL failed to show the trigger; its next run was lost). A
-- trigger never runs past 9999, so such a start or end date means the last instant of 9999, and
-- a next run past it is none: an active trigger with no run left is finished.
UPDATE "Trigger"
SET "status" = CASE WHEN "status" = 'active' THEN 'finished'::"TriggerStatus" ELSE "status" END,
    "nextRun" = NULL,
    "queuedFor" = NULL
WHERE "nextRun" >= '10000-01-01' OR "startDate" >= '10000-01-01';

UPDATE "Trigger" SET "startDate" = '9999-12-31 23:59:59.999' WHERE "startDate" >= '10000-01-01';
UPDATE "Trigger" SET "endDate" = '9999-12-31 23:59:59.999' WHERE "endDate" >= '10000-01-01';
