import { type CliIo, say } from '../io.ts';
import { runCommand } from '../services.ts';

export async function migrate(io: CliIo): Promise<number> {
  const { newDatabase, applied, pgvector } = await runCommand(io, 'migrate', {});
  if (newDatabase) say(io, "new database: copied from the build's snapshot, which has the migrations up to it");
  say(io, applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
  if (pgvector === 'upgraded') say(io, 'embeddings: now pgvector vector(768) with an HNSW index');
  return 0;
}
