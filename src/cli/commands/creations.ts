import { createReadStream } from 'node:fs';
import { resolve } from 'node:path';
import type { ImportSummary } from '../../domain/search/index.ts';
import { type CliIo, say } from '../io.ts';
import { progress } from '../progress.ts';
import { runCommand } from '../services.ts';

const SHOWN_REJECTIONS = 20;

async function countLines(path: string): Promise<number> {
  let lines = 0;
  let lastByte = 10;
  for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) {
    for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
    if (chunk.length) lastByte = chunk[chunk.length - 1]!;
  }
  return lastByte === 10 ? lines : lines + 1;
}

function describeSummary(s: ImportSummary, provider: string): string {
  const out = [
    `Imported ${s.imported} creations (${s.embedded} embedded by ${provider}), skipped ${s.skipped} already present, rejected ${s.rejected} of ${s.lines} lines.`,
  ];
  if (s.rejected) {
    const byReason = new Map<string, number>();
    for (const r of s.rejections) {
      const kind = r.reason.split(':')[0]!;
      byReason.set(kind, (byReason.get(kind) ?? 0) + 1);
    }
    out.push(`Rejected by reason: ${[...byReason].map(([k, n]) => `${k} ${n}`).join(', ')}`);
    for (const r of s.rejections.slice(0, SHOWN_REJECTIONS)) out.push(`  line ${r.line}: ${r.reason}`);
    if (s.rejections.length > SHOWN_REJECTIONS)
      out.push(`  ... and ${s.rejections.length - SHOWN_REJECTIONS} more (--json lists them all)`);
  }
  return out.join('\n');
}

export async function importFile(io: CliIo, path: string, json: boolean): Promise<number> {
  const total = await countLines(path);
  const bar = progress('import', 'lines', total, io.stderr);
  let imported: { summary: ImportSummary; provider: string };
  try {
    // Absolute: a running service may be the one reading the file, from its own directory.
    imported = await runCommand(io, 'creations.import', { path: resolve(path), total }, (done) => bar.update(done));
  } finally {
    bar.stop();
  }
  const { summary, provider } = imported;
  say(io, json ? JSON.stringify(summary) : describeSummary(summary, provider));
  return 0;
}

export async function reembed(io: CliIo, all: boolean): Promise<number> {
  let bar: ReturnType<typeof progress> | undefined;
  const result = await runCommand(io, 'creations.reembed', { all }, (done, total) => {
    bar ??= progress('reembed', 'creations', total, io.stderr);
    bar.update(done);
  });
  bar?.stop();
  say(io, `Re-embedded ${result.reembedded} creations with ${result.provider}.`);
  return 0;
}
