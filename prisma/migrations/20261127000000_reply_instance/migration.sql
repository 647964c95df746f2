-- The server process writing a reply, so that replies a dead process left `streaming` can be closed.

-- AlterTable
ALTER TABLE "Message" ADD COLUMN     "instance" TEXT;

-- Recovery looks for streaming replies (of one instance, or all): few rows, so a partial index
-- that holds only those stays small however many messages there are.
CREATE INDEX "Message_streaming_instance_idx" ON "Message"("instance") WHERE "status" = 'streaming';
