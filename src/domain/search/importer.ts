import { creationText } from './creation-text.ts';
import { unitVector, type EmbeddingProvider } from './embeddings/provider.ts';
import { parseImportLine, type ImportLine } from './import-line.ts';
import type { NewCreation, SearchStore } from './store.ts';

export interface ImportCounts {
  /** Lines read so far (blank lines included). */
  lines: number;
  imported: number;
  /** Already in the database: imported by an earlier run, or twice in this file. */
  skipped: number;
  rejected: number;
}

export interface ImportSummary extends ImportCounts {
  /** Every rejected line with its number and the reason. */
  rejections: { line: number; reason: string }[];
  /** Lines whose vector the provider computed (no embedding given, or one from another space). */
  embedded: number;
}

interface Pending {
  number: number;
  line: ImportLine;
}

const IMPORT_BATCH = 250;

export interface ImportOptions {
  batchSize?: number;
  onProgress?: (counts: ImportCounts) => void;
}

/**
 * Imports creations from JSON lines. Lines go in batches: each batch is checked (creator, agent,
 * ids already present), the lines without a usable embedding are embedded together, and the
 * rows with their vectors are written in one statement, so a creation is never half-written.
 * A line that cannot be imported is rejected with its reason and the import goes on; if the
 * embedding provider fails, the import stops and a second run resumes after the last batch.
 */
export async function importCreations(
  store: Pick<SearchStore, 'creatorsNamed' | 'existingIds' | 'insertWithVectors'>,
  provider: EmbeddingProvider,
  lines: AsyncIterable<string>,
  options: ImportOptions = {},
): Promise<ImportSummary> {
  const batchSize = options.batchSize ?? IMPORT_BATCH;
  const summary: ImportSummary = { lines: 0, imported: 0, skipped: 0, rejected: 0, rejections: [], embedded: 0 };
  const reject = (number: number, reason: string) => {
    summary.rejected++;
    summary.rejections.push({ line: number, reason });
  };
  const creators = new Map<string, { id: string; isAgent: boolean } | null>();

  async function resolveCreators(names: string[]) {
    const missing = [...new Set(names)].filter((n) => !creators.has(n));
    if (missing.length === 0) return;
    const found = await store.creatorsNamed(missing);
    for (const n of missing) creators.set(n, null);
    for (const u of found) creators.set(u.username, { id: u.id, isAgent: u.isAgent });
  }

  async function flush(batch: Pending[]) {
    await resolveCreators(batch.flatMap((p) => [p.line.user, ...(p.line.agent ? [p.line.agent] : [])]));
    const existing = await store.existingIds(batch.map((p) => p.line.id));
    const ready: { number: number; text: string; row: Omit<NewCreation, 'vector'> & { vector?: Float32Array } }[] = [];
    // Ids of earlier batches are in the database by now; this catches repeats within the batch.
    const seen = new Set<string>();
    for (const { number, line } of batch) {
      const user = creators.get(line.user);
      const agent = line.agent ? creators.get(line.agent) : undefined;
      if (!user) reject(number, `user: no creator named "${line.user}"`);
      else if (line.agent && !agent?.isAgent) reject(number, `agent: no agent with the key "${line.agent}"`);
      else if (existing.has(line.id) || seen.has(line.id)) summary.skipped++;
      else {
        seen.add(line.id);
        const ownVector = line.embedding && (line.embeddingProvider ?? provider.name) === provider.name;
        ready.push({
          number,
          text: creationText(line),
          row: {
            id: line.id,
            userId: user.id,
            agentId: agent?.id ?? null,
            tool: line.tool,
            name: line.name,
            url: line.url,
            thumbnail: line.thumbnail ?? null,
            filename: line.filename ?? null,
            args: line.args,
            mediaAttributes: line.mediaAttributes,
            public: line.public,
            createdAt: line.createdAt ? new Date(line.createdAt) : undefined,
            vector: ownVector ? unitVector(line.embedding!) : undefined,
          },
        });
      }
    }
    const toEmbed = ready.filter((r) => !r.row.vector);
    const computed = await provider.embed(toEmbed.map((r) => r.text));
    toEmbed.forEach((r, i) => (r.row.vector = computed[i]));
    summary.embedded += toEmbed.length;

    // One statement per batch: each creation is written whole, with its vector, or not at all.
    const write = async (rows: typeof ready) => {
      const inserted = (
        await store.insertWithVectors(
          provider.name,
          rows.map((r) => r.row as NewCreation),
        )
      ).length;
      summary.imported += inserted;
      summary.skipped += rows.length - inserted;
    };
    try {
      await write(ready);
    } catch {
      // Something in the batch passed the checks but not the database: find it, keep the rest.
      for (const r of ready) {
        try {
          await write([r]);
        } catch (e) {
          reject(r.number, `the database refused it (${(e as Error).message.trim().split('\n').at(-1)})`);
        }
      }
    }
  }

  let batch: Pending[] = [];
  for await (const text of lines) {
    const number = ++summary.lines;
    if (text.trim() === '') continue;
    const parsed = parseImportLine(text);
    if (!parsed.ok) reject(number, parsed.reason);
    else batch.push({ number, line: parsed.line });
    if (batch.length >= batchSize) {
      await flush(batch);
      batch = [];
      options.onProgress?.(counts(summary));
    }
  }
  if (batch.length) await flush(batch);
  options.onProgress?.(counts(summary));
  return summary;
}

const counts = ({ lines, imported, skipped, rejected }: ImportSummary): ImportCounts => ({ lines, imported, skipped, rejected });
