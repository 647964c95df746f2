import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { newId } from '../../core/ids.ts';
import { mediaLink } from '../../core/media-links.ts';
import type { MediaStore } from '../../media/store.ts';
import type { Executor, MediaOutput } from './types.ts';

export { paint } from './painter.js';

const MAX_SIDE = 2048;
const THUMBNAIL_SIDE = 256;

interface PaintJob {
  prompt: string;
  seed: number;
  width: number;
  height: number;
  thumbnailSide: number;
}
type Painted = { image: Buffer; thumbnail: Buffer };

/**
 * Worker threads that paint (painter.js), shared by every app in the process: painting is CPU
 * work, and a process has only so many cores however many apps it hosts. Jobs wait for a free
 * thread in order; threads start when first needed and do not keep the process alive.
 */
class PaintPool {
  private readonly idle: Worker[] = [];
  private readonly waiting: { job: PaintJob; resolve(p: Painted): void; reject(e: Error): void }[] = [];
  private started = 0;
  private next = 0;

  constructor(private readonly size: number) {}

  paint(job: PaintJob): Promise<Painted> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ job, resolve, reject });
      this.dispatch();
    });
  }

  private dispatch() {
    while (this.waiting.length) {
      const worker = this.idle.pop() ?? (this.started < this.size ? this.start() : undefined);
      if (!worker) return;
      const task = this.waiting.shift()!;
      const id = ++this.next;
      const done = (reply: { id: number; image?: Uint8Array; thumbnail?: Uint8Array; error?: string }) => {
        if (reply.id !== id) return;
        worker.off('message', done);
        worker.off('error', failed);
        this.idle.push(worker);
        if (reply.error) task.reject(new Error(reply.error));
        else task.resolve({ image: Buffer.from(reply.image!), thumbnail: Buffer.from(reply.thumbnail!) });
        this.dispatch();
      };
      const failed = (e: Error) => {
        worker.off('message', done);
        this.started--;
        task.reject(e);
        this.dispatch();
      };
      worker.on('message', done);
      worker.once('error', failed);
      worker.postMessage({ id, job: task.job });
    }
  }

  private start() {
    this.started++;
    const worker = new Worker(new URL('./painter.js', import.meta.url));
    worker.unref();
    return worker;
  }
}

let pool: PaintPool | undefined;
const paintPool = (size: number) => (pool ??= new PaintPool(size));

/** The size asked for: a `resolution` ("1344x768"), `width` and `height`, or the tool's first resolution. */
export function imageSize(args: Record<string, unknown>, resolutions: string[]): { width: number; height: number } {
  const named = typeof args.resolution === 'string' ? args.resolution : (resolutions[0] ?? '1024x1024');
  const [rw, rh] = named.split('x').map(Number);
  const width = typeof args.width === 'number' ? args.width : rw!;
  const height = typeof args.height === 'number' ? args.height : rh!;
  const clamp = (n: number) => Math.max(16, Math.min(MAX_SIDE, Math.round(n)));
  return { width: clamp(width), height: clamp(height) };
}

/**
 * Renders `n_samples` PNGs (default 1) for the prompt and keeps them with their thumbnails. Its
 * result links to them as they are stored, relative to the service: whoever shows it (the model,
 * a client) is given them absolute.
 */
export function imageExecutor(media: MediaStore, workers: number): Executor {
  const painter = paintPool(workers);
  return async ({ tool, args, signal, progress }) => {
    const prompt = String(args.prompt ?? '');
    const { width, height } = imageSize(args, tool.resolutions);
    const count = typeof args.n_samples === 'number' ? args.n_samples : 1;
    const seed =
      typeof args.seed === 'number' ? args.seed : Number.parseInt(createHash('sha256').update(prompt).digest('hex').slice(0, 8), 16);
    const outputs: MediaOutput[] = [];
    for (let n = 0; n < count; n++) {
      signal.throwIfAborted();
      const painted = await painter.paint({ prompt, seed: seed + n, width, height, thumbnailSide: THUMBNAIL_SIDE });
      const id = newId();
      await media.write(`${id}.png`, painted.image);
      await media.write(`${id}-thumb.png`, painted.thumbnail);
      outputs.push({
        id,
        name: prompt.slice(0, 100) || tool.name,
        url: mediaLink(`${id}.png`),
        thumbnail: mediaLink(`${id}-thumb.png`),
        filename: `${id}.png`,
        mediaAttributes: { mimeType: 'image/png', width, height, aspectRatio: Number((width / height).toFixed(4)) },
      });
      progress?.((n + 1) / count, `Painted ${n + 1} of ${count}`);
    }
    return {
      result: {
        images: outputs.map((o) => ({ creationId: o.id, url: o.url, width, height })),
        note: 'Rendered locally from the prompt (a deterministic painting, not a diffusion model).',
      },
      media: outputs,
    };
  };
}
