import { loadConfig } from '../../config.ts';
import { openDatabase } from '../../db/database.ts';
import { applyMigrations } from '../../db/migrate.ts';
import { upgradeToPgvector } from '../../db/vector-column.ts';

export async function migrate(): Promise<number> {
  const database = await openDatabase(loadConfig().database);
  try {
    const applied = await database.exclusively(() => applyMigrations(database.migrationAdapterFactory));
    console.log(applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
    if ((await upgradeToPgvector(database.prisma)) === 'upgraded') console.log('embeddings: now pgvector vector(768) with an HNSW index');
  } finally {
    await database.close();
  }
  return 0;
}
