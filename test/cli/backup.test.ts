import { createHash } from 'node:crypto';
import { watch } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withPGlite } from '../../src/db/pglite-thread.ts';
import { runCli, type ServerProcess, startCliProcess, startServerProcess } from '../helpers/process.ts';
import { expectConsistent, expectSameView, fill, MEDIA_BYTES, MEDIA_FILE, type View, view } from './moving-data.ts';

/**
 * A backup file made again from its lines, with a final checksum that matches them: what anyone
 * who edits a backup can do (the checksum finds damage, not intent).
 */
function recrafted(lines: string[]): Buffer {
  const body = lines.filter((l) => l && !l.startsWith('{"end":'));
  const hash = createHash('sha256');
  for (const line of body) hash.update(line).update('\n');
  return gzipSync([...body, JSON.stringify({ end: true, sha256: hash.digest('hex') }), ''].join('\n'));
}

/** Each file of `dir` and its content; empty for no folder. */
async function filesIn(dir: string): Promise<Record<string, string>> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const out: Record<string, string> = {};
  for (const name of names.sort()) out[name] = (await readFile(join(dir, name))).toString('base64');
  return out;
}

/**
 * `parley backup` and `parley restore` on the embedded database, as a user runs them: the service
 * and each command are real processes, the backup is taken while the service serves and writes,
 * and a second service started on the restored directory must answer as the first did.
 */
describe('backup and restore of the embedded database', () => {
  let root: string;
  let dataDir: string;
  let server: ServerProcess;
  let filled: Awaited<ReturnType<typeof fill>>;
  let before: View;
  const backupFile = () => join(root, 'parley.backup');
  const restoredDir = () => join(root, 'restored');
  const startedOnlyDir = () => join(root, 'started-only');

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'parley-backup-'));
    dataDir = join(root, 'data');
    // A second service only starts and stops, beside the first: a directory a later restore may take without --force.
    const startOnly = async () => {
      const started = await startServerProcess({ DATA_DIR: startedOnlyDir() });
      await started.waitFor(/parley listening on/);
      started.child.kill('SIGTERM');
      expect(await started.exited).toBe(0);
    };
    [server] = await Promise.all([startServerProcess({ DATA_DIR: dataDir }), startOnly()]);
    await server.waitFor(/parley listening on/);
  });
  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await server?.exited;
    await rm(root, { recursive: true, force: true });
  });

  // Filled in a hook of its own: each hook has its time, and filling takes a good part of it on a busy machine.
  describe('filled as users fill it', () => {
    beforeAll(async () => {
      filled = await fill(server, dataDir);
    });

    it('writes a backup while the service serves and writes, with progress and a summary', async () => {
      before = await view(server.url, filled.alice);
      const backup = startCliProcess(['backup', backupFile()], { DATA_DIR: dataDir });
      // Writes keep coming while the backup runs: it must hold each whole or not at all.
      let likes = 0;
      let finished = false;
      const writing = (async () => {
        for (const id of filled.publicCreations) {
          if (finished) break;
          const res = await fetch(`${server.url}/v2/creations/${id}/like`, { method: 'POST', headers: { 'x-api-key': filled.bob } });
          expect(res.status).toBe(200);
          likes++;
        }
      })();
      const code = await backup.exited;
      finished = true;
      await writing;
      expect(code, backup.output()).toBe(0);
      expect(likes).toBeGreaterThan(0);
      expect(backup.output()).toMatch(/backup: \d+\/\d+ rows/);
      expect(backup.output()).toMatch(
        /Backup written to .*parley\.backup \(\d.* in [\d.]+ s\.\n.*copied while the service \(pid \d+\) ran, which then held its statements \d+ ms for what changed meanwhile.*\n\d+ rows in \d+ tables .*; [1-9]\d* media files/,
      );
      expect((await stat(backupFile())).mode & 0o777).toBe(0o600);
      // Nothing of the backup's own is left: no unfinished file beside it, no copy of the database.
      expect((await readdir(root)).filter((n) => n.includes('partial'))).toEqual([]);
      expect((await readdir(dataDir)).filter((n) => n.startsWith('.backup'))).toEqual([]);
    });

    it('restores into a new data directory, checking every table against the backup', async () => {
      const restored = await runCli(['restore', backupFile()], { DATA_DIR: restoredDir() });
      expect(restored.code, restored.stderr).toBe(0);
      expect(restored.stdout).toMatch(
        /Restored .* into .*restored.*\n.*every table's count and checksum as in the backup; [1-9]\d* media files/,
      );
      expect((await readdir(restoredDir())).sort()).toEqual(['media', 'pgdata']);
    });

    it('a service started on the restored directory answers as the first did before the backup began', async () => {
      const second = await startServerProcess({ DATA_DIR: restoredDir() });
      try {
        await second.waitFor(/parley listening on/);
        expectSameView(await view(second.url, filled.alice), before);
        const media = await fetch(`${second.url}/media/${MEDIA_FILE}`);
        expect(Buffer.from(await media.arrayBuffer())).toEqual(MEDIA_BYTES);
      } finally {
        second.child.kill('SIGTERM');
        await second.exited;
      }
    });

    it('the restored database is consistent: balances are their ledger, like counts their likes', async () => {
      await withPGlite(join(restoredDir(), 'pgdata'), expectConsistent);
    });

    it('killed with SIGKILL while writing, a backup leaves no file under its name and the live database as it was', async () => {
      const file = join(root, 'killed.backup');
      const unchanged = await view(server.url, filled.alice);
      const backup = startCliProcess(['backup', file], { DATA_DIR: dataDir });
      // The moment it starts writing its file: rows are being read and written.
      await new Promise<void>((resolve) => {
        const watcher = watch(root, (_, name) => {
          if (name?.startsWith('.killed.backup.')) {
            watcher.close();
            resolve();
          }
        });
      });
      backup.child.kill('SIGKILL');
      await backup.exited;
      await expect(stat(file)).rejects.toThrow(/ENOENT/);
      expect((await readdir(root)).filter((n) => n.startsWith('.killed.backup.'))).toHaveLength(1);
      expectSameView(await view(server.url, filled.alice), unchanged);

      const again = await runCli(['backup', file], { DATA_DIR: dataDir });
      expect(again.code, again.stderr).toBe(0);
      expect((await stat(file)).size).toBeGreaterThan(0);
      // The next backup removed what the killed one left: its unfinished file and its copy of the database.
      expect((await readdir(root)).filter((n) => n.startsWith('.killed.backup.'))).toEqual([]);
      expect((await readdir(dataDir)).filter((n) => n.startsWith('.backup'))).toEqual([]);
    });

    it('restore refuses a truncated file, another program’s, a damaged one, and one from a newer parley, before changing anything', async () => {
      const good = await readFile(backupFile());
      const lines = gunzipSync(good).toString('utf8').split('\n');
      const header = JSON.parse(lines[0]!);
      const withHeader = (h: unknown) => gzipSync([JSON.stringify(h), ...lines.slice(1)].join('\n'));
      const damaged = [...lines];
      damaged[5] = damaged[5]!.replace(/\d/, (d) => String((Number(d) + 1) % 10));
      const cases: [string, Buffer, RegExp][] = [
        ['truncated', good.subarray(0, Math.floor(good.length / 2)), /is truncated: it ends before the backup does/],
        ['not gzip', Buffer.from('id,name\n1,alice\n'), /is not a parley backup \(it is not gzip-compressed/],
        ['another program', gzipSync('{"version": 3, "rows": []}\n'), /is not a parley backup \(no parley backup header\)/],
        ['damaged', gzipSync(damaged.join('\n')), /is damaged: its content does not match its checksum/],
        ['newer format', withHeader({ ...header, parleyBackup: 2 }), /was made by a newer parley .*backup format 2.*cannot read it/],
        [
          'newer migrations',
          withHeader({
            ...header,
            migrations: [...header.migrations, { name: '29990101000000_from_the_future', checksum: 'f'.repeat(64) }],
          }),
          /was made by a newer parley .*migrations this version does not know \(29990101000000_from_the_future\)/,
        ],
      ];
      for (const [name, content, message] of cases) {
        const file = join(root, `${name.replace(/ /g, '-')}.backup`);
        await writeFile(file, content);
        const target = join(root, `target-${name.replace(/ /g, '-')}`);
        const result = await runCli(['restore', file], { DATA_DIR: target });
        expect(result.code, name).toBe(1);
        expect(result.stderr, name).toMatch(message);
        expect(result.stderr, name).not.toMatch(/\n\s+at /);
        await expect(stat(target), name).rejects.toThrow(/ENOENT/);
      }
    });

    it('a restore refused after loading, or over a media file that exists, leaves MEDIA_DIR as it was', async () => {
      const lines = gunzipSync(await readFile(backupFile()))
        .toString('utf8')
        .split('\n');
      // The media file's bytes replaced (same size), and a table's checksum in the header broken:
      // the file's own checksum made again, it passes every check that reads the file alone.
      const crafted = [...lines];
      const at = crafted.findIndex((l) => l.startsWith(`{"media":${JSON.stringify(MEDIA_FILE)}`));
      expect(at).toBeGreaterThan(0);
      crafted[at + 1] = JSON.stringify(Buffer.alloc(MEDIA_BYTES.length, 0x41).toString('base64'));
      const header = JSON.parse(crafted[0]!);
      header.tables.find((t: { name: string }) => t.name === 'User').checksum = 'crafted';
      crafted[0] = JSON.stringify(header);
      const craftedFile = join(root, 'crafted.backup');
      await writeFile(craftedFile, recrafted(crafted));

      const live = join(root, 'live-media');
      await mkdir(live);
      await writeFile(join(live, MEDIA_FILE), MEDIA_BYTES);
      await writeFile(join(live, 'kept.png'), 'kept');
      const elsewhere = join(root, 'other-media');
      await mkdir(elsewhere);
      await writeFile(join(elsewhere, MEDIA_FILE), 'another file of that name');
      const cases: [string, string, string, RegExp][] = [
        [
          'crafted, over the live media',
          craftedFile,
          live,
          /already holds 1 of the backup's media files with other content \(moved-0001\.png\)/,
        ],
        [
          'crafted, into an empty media folder',
          craftedFile,
          join(root, 'empty-media'),
          /Table User restored from .* differs from the backup/,
        ],
        [
          'a good backup, over another file of that name',
          backupFile(),
          elsewhere,
          /already holds 1 of the backup's media files with other content/,
        ],
      ];
      for (const [name, file, mediaDir, message] of cases) {
        const before = await filesIn(mediaDir);
        const target = join(root, `media-${name.replace(/\W+/g, '-')}`);
        const result = await runCli(['restore', file], { DATA_DIR: target, MEDIA_DIR: mediaDir });
        expect(await filesIn(mediaDir), name).toEqual(before);
        expect(result.code, name).toBe(1);
        expect(result.stderr, name).toMatch(message);
        // Nor a database, nor what the restore made aside.
        expect(
          (await readdir(target).catch(() => [] as string[])).filter((n) => !n.startsWith('.')),
          name,
        ).toEqual([]);
      }
      expect(await readFile(join(live, MEDIA_FILE))).toEqual(MEDIA_BYTES);
    });

    it('restore refuses a file that decompresses to far more than its size, before writing anything', async () => {
      const header = gunzipSync(await readFile(backupFile()))
        .toString('utf8')
        .split('\n')[0]!;
      // 48 MiB of one letter: gzip makes it a thousand times smaller.
      const filler = `"${'A'.repeat(1024 * 1024)}"`;
      const bomb = gzipSync([header, '{"media":"bomb.png","bytes":0}', ...Array(48).fill(filler), ''].join('\n'), { level: 9 });
      expect(bomb.length).toBeLessThan(1024 * 1024);
      const file = join(root, 'bomb.backup');
      await writeFile(file, bomb);
      const target = join(root, 'target-bomb');
      const result = await runCli(['restore', file], { DATA_DIR: target, MEDIA_DIR: join(target, 'media') });
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(
        /bomb\.backup decompresses to more than 100 times its size \(\d+ bytes\).*refused before anything was written/,
      );
      await expect(stat(target)).rejects.toThrow(/ENOENT/);
    });

    it('restore refuses a data directory in use, and one that holds data', async () => {
      const inUse = await runCli(['restore', backupFile()], { DATA_DIR: dataDir });
      expect(inUse.code).toBe(1);
      expect(inUse.stderr).toMatch(/is in use by another parley process \(pid \d+\)/);

      const refused = await runCli(['restore', backupFile()], { DATA_DIR: restoredDir() });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/holds a database with data \(.*User \d+.*\)\. Restoring replaces it: run again with --force/);
    });

    it('restore needs no --force for a data directory a service only started in', async () => {
      const restored = await runCli(['restore', backupFile(), '--json'], { DATA_DIR: startedOnlyDir() });
      expect(restored.code, restored.stderr).toBe(0);
    });

    it('restore --force replaces the database a data directory holds', async () => {
      const target = restoredDir();
      const forced = await runCli(['restore', backupFile(), '--force', '--json'], { DATA_DIR: target });
      expect(forced.code, forced.stderr).toBe(0);
      expect(JSON.parse(forced.stdout)).toMatchObject({
        dataDir: target,
        tables: expect.arrayContaining([expect.objectContaining({ name: 'User' })]),
      });
      // The directory's secrets key stays: a backup carries no key (docs/deployments.md), and the
      // service that ran here made one.
      expect((await readdir(target)).sort()).toEqual(['media', 'pgdata', 'secrets.key']);
    });
  });
});
