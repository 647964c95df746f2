import { runCommand } from '../services.ts';

export async function migrate(): Promise<number> {
  const { newDatabase, applied, pgvector } = await runCommand('migrate', {});
  if (newDatabase) console.log("new database: copied from the build's snapshot, which has the migrations up to it");
  console.log(applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
  if (pgvector === 'upgraded') console.log('embeddings: now pgvector vector(768) with an HNSW index');
  return 0;
}
