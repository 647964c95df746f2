import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * The files the service makes (tool outputs), kept in one folder and served under /media/.
 * Files are named by the creation they belong to, and never change; their links are stored
 * relative to the service (`core/media-links.ts`).
 */
export function mediaStore(dir: string) {
  let ready: Promise<unknown> | undefined;
  return {
    dir,
    async write(file: string, data: Buffer) {
      await (ready ??= mkdir(dir, { recursive: true }));
      await writeFile(join(dir, file), data);
    },
  };
}

export type MediaStore = ReturnType<typeof mediaStore>;
