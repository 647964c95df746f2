-- Signals that must reach every instance (a user removed, a session deleted, a key revoked),
-- written in the transaction of the change they announce and deleted once the event bus has
-- taken them; whatever the bus could not take (Redis out of reach) any instance delivers later.

-- CreateTable
CREATE TABLE "PendingSignal" (
    "id" BIGSERIAL NOT NULL,
    "kind" TEXT NOT NULL,
    "sessionId" TEXT,
    "payload" JSONB NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "PendingSignal_pkey" PRIMARY KEY ("id")
);
