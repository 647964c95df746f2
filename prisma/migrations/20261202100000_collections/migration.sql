-- Collections: a user's named sets of creations, each creation at most once per collection.
-- Both tables go with what they belong to (user, collection, creation); db copy orders them after
-- User and Creation by their foreign keys.
-- CreateTable
CREATE TABLE "Collection" (
    "id" TEXT NOT NULL,
    "userId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "public" BOOLEAN NOT NULL DEFAULT true,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "Collection_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "CollectionCreation" (
    "id" TEXT NOT NULL,
    "collectionId" TEXT NOT NULL,
    "creationId" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "CollectionCreation_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "Collection_userId_createdAt_idx" ON "Collection"("userId", "createdAt");

-- CreateIndex
CREATE INDEX "CollectionCreation_collectionId_id_idx" ON "CollectionCreation"("collectionId", "id");

-- CreateIndex
CREATE INDEX "CollectionCreation_creationId_idx" ON "CollectionCreation"("creationId");

-- CreateIndex
CREATE UNIQUE INDEX "CollectionCreation_collectionId_creationId_key" ON "CollectionCreation"("collectionId", "creationId");

-- AddForeignKey
ALTER TABLE "Collection" ADD CONSTRAINT "Collection_userId_fkey" FOREIGN KEY ("userId") REFERENCES "User"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "CollectionCreation" ADD CONSTRAINT "CollectionCreation_collectionId_fkey" FOREIGN KEY ("collectionId") REFERENCES "Collection"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "CollectionCreation" ADD CONSTRAINT "CollectionCreation_creationId_fkey" FOREIGN KEY ("creationId") REFERENCES "Creation"("id") ON DELETE CASCADE ON UPDATE CASCADE;
