import { loadConfig } from '../../config.ts';
import { openDatabase } from '../../db/database.ts';
import { applyMigrations } from '../../db/migrate.ts';
import { upgradeToPgvector } from '../../db/vector-column.ts';

export async function migrate(): Promise<number> {
  const database = await openDatabase(loadConfig().database);
  try {
    if (database.fromSnapshot) console.log("new database: copied from the build's snapshot, which has the migrations up to it");
    const applied = await database.exclusively(() => applyMigrations(database.migrationAdapterFactory));
    console.log(applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
    if ((await upgradeToPgvector(database.prisma)) === 'upgraded') console.log('embeddings: now pgvector vector(768) with an HNSW index');
  } finally {
    await database.close();
  }
  return 0;
}
