-- Triggers with a run under way: the sweep settles those no one follows any more (their process
-- died) and reads them as this index, which holds only those, not every trigger.
CREATE INDEX "Trigger_running_idx" ON "Trigger"("id") WHERE "runningRunId" IS NOT NULL;
