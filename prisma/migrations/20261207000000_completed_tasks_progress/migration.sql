-- A reply's tool call was settled as completed with its progress left at 0 (a task run by
-- itself got 1): every completed task is done, whichever way its tool was called.
UPDATE "Task" SET "progress" = 1 WHERE "status" = 'completed' AND "progress" <> 1;
