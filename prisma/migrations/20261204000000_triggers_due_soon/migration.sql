-- Next runs with no job queued yet, by when they are due: the triggers' sweep reads those due
-- soon as a range of this index and queues their jobs (a trigger due months ahead waits here, not
-- on the job queue, whose polls would read every waiting job). Replaces the index by id.
CREATE INDEX "Trigger_unqueued_next_idx" ON "Trigger"("nextRun") WHERE "nextRun" IS NOT NULL AND "nextRun" IS DISTINCT FROM "queuedFor";

DROP INDEX "Trigger_unqueued_idx";
