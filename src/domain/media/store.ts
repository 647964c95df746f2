import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Files under /media/ are named by the creation they belong to, and never change. */
export const MEDIA_PATH = '/media';

/**
 * The files the service makes (tool outputs), kept in one folder and served under /media/.
 * Links are absolute: `publicUrl` is where clients reach the service (asked when a link is made,
 * since the port may only be known once the service listens).
 */
export function mediaStore(dir: string, publicUrl: () => string) {
  let ready: Promise<unknown> | undefined;
  return {
    dir,
    url: (file: string) => `${publicUrl()}${MEDIA_PATH}/${file}`,
    async write(file: string, data: Buffer) {
      await (ready ??= mkdir(dir, { recursive: true }));
      await writeFile(join(dir, file), data);
    },
  };
}

export type MediaStore = ReturnType<typeof mediaStore>;
