import { createHash } from 'node:crypto';
import { PNG } from 'pngjs';
import { newId } from '../../ids.ts';
import type { MediaStore } from '../../media/store.ts';
import type { Executor, MediaOutput } from './types.ts';

const MAX_SIDE = 2048;
const THUMBNAIL_SIDE = 256;

/** A small deterministic random source, so the same prompt and seed draw the same picture. */
function random(seedText: string) {
  let state = createHash('sha256').update(seedText).digest().readUInt32LE(0);
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t ^= t + Math.imul(t ^ (t >>> 7), 61 | t);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const hueOf = (word: string) => createHash('md5').update(word.toLowerCase()).digest().readUInt16LE(0) % 360;

function rgb(hue: number, saturation: number, lightness: number): [number, number, number] {
  const c = (1 - Math.abs(2 * lightness - 1)) * saturation;
  const x = c * (1 - Math.abs(((hue / 60) % 2) - 1));
  const m = lightness - c / 2;
  const [r, g, b] =
    hue < 60 ? [c, x, 0] : hue < 120 ? [x, c, 0] : hue < 180 ? [0, c, x] : hue < 240 ? [0, x, c] : hue < 300 ? [x, 0, c] : [c, 0, x];
  return [Math.round((r + m) * 255), Math.round((g + m) * 255), Math.round((b + m) * 255)];
}

/**
 * Paints a picture from a prompt: a gradient in the colours of its first words, then a soft
 * shape for each word, placed by a random source seeded with the prompt. Not a model: the same
 * prompt always gives the same image, and it works with nothing else installed.
 */
export function paint(prompt: string, seed: number, width: number, height: number): PNG {
  const words = (prompt.match(/[\p{L}\p{N}]+/gu) ?? ['untitled']).slice(0, 12);
  const next = random(`${prompt}\u0000${seed}`);
  const png = new PNG({ width, height });
  const [top, bottom] = [rgb(hueOf(words[0]!), 0.55, 0.25), rgb(hueOf(words.at(-1)!), 0.6, 0.6)];
  for (let y = 0; y < height; y++) {
    const f = y / Math.max(1, height - 1);
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 4;
      for (let k = 0; k < 3; k++) png.data[i + k] = top[k]! + (bottom[k]! - top[k]!) * f;
      png.data[i + 3] = 255;
    }
  }
  for (const word of words) {
    const [r, g, b] = rgb((hueOf(word) + next() * 30) % 360, 0.7, 0.45 + next() * 0.3);
    const cx = next() * width;
    const cy = next() * height;
    const radius = (0.08 + next() * 0.25) * Math.min(width, height);
    for (let y = Math.max(0, Math.floor(cy - radius)); y < Math.min(height, Math.ceil(cy + radius)); y++) {
      for (let x = Math.max(0, Math.floor(cx - radius)); x < Math.min(width, Math.ceil(cx + radius)); x++) {
        const d = Math.hypot(x - cx, y - cy) / radius;
        if (d >= 1) continue;
        const a = 0.75 * (1 - d * d);
        const i = (y * width + x) * 4;
        png.data[i] = png.data[i]! * (1 - a) + r * a;
        png.data[i + 1] = png.data[i + 1]! * (1 - a) + g * a;
        png.data[i + 2] = png.data[i + 2]! * (1 - a) + b * a;
      }
    }
  }
  return png;
}

/** The picture made smaller (each pixel the average of the area it covers). */
export function shrink(source: PNG, side: number): PNG {
  const scale = Math.min(1, side / Math.max(source.width, source.height));
  const width = Math.max(1, Math.round(source.width * scale));
  const height = Math.max(1, Math.round(source.height * scale));
  const out = new PNG({ width, height });
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const [x0, x1] = [Math.floor(x / scale), Math.min(source.width, Math.floor((x + 1) / scale))];
      const [y0, y1] = [Math.floor(y / scale), Math.min(source.height, Math.floor((y + 1) / scale))];
      const sum = [0, 0, 0];
      let n = 0;
      for (let sy = y0; sy < Math.max(y1, y0 + 1); sy++) {
        for (let sx = x0; sx < Math.max(x1, x0 + 1); sx++) {
          const i = (sy * source.width + sx) * 4;
          for (let k = 0; k < 3; k++) sum[k]! += source.data[i + k]!;
          n++;
        }
      }
      const o = (y * width + x) * 4;
      for (let k = 0; k < 3; k++) out.data[o + k] = sum[k]! / n;
      out.data[o + 3] = 255;
    }
  }
  return out;
}

/** PNG bytes; deflating runs on libuv's thread pool rather than on the event loop. */
const encode = (png: PNG) =>
  new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    png
      .pack()
      .on('data', (c: Buffer) => chunks.push(c))
      .on('end', () => resolve(Buffer.concat(chunks)))
      .on('error', reject);
  });

/** The size asked for: a `resolution` ("1344x768"), `width` and `height`, or the tool's first resolution. */
export function imageSize(args: Record<string, unknown>, resolutions: string[]): { width: number; height: number } {
  const named = typeof args.resolution === 'string' ? args.resolution : (resolutions[0] ?? '1024x1024');
  const [rw, rh] = named.split('x').map(Number);
  const width = typeof args.width === 'number' ? args.width : rw!;
  const height = typeof args.height === 'number' ? args.height : rh!;
  const clamp = (n: number) => Math.max(16, Math.min(MAX_SIDE, Math.round(n)));
  return { width: clamp(width), height: clamp(height) };
}

/** Renders `n_samples` PNGs (default 1) for the prompt and keeps them with their thumbnails. */
export function imageExecutor(media: MediaStore): Executor {
  return async ({ tool, args, signal }) => {
    const prompt = String(args.prompt ?? '');
    const { width, height } = imageSize(args, tool.resolutions);
    const count = typeof args.n_samples === 'number' ? args.n_samples : 1;
    const seed =
      typeof args.seed === 'number' ? args.seed : Number.parseInt(createHash('sha256').update(prompt).digest('hex').slice(0, 8), 16);
    const outputs: MediaOutput[] = [];
    for (let n = 0; n < count; n++) {
      signal.throwIfAborted();
      const picture = paint(prompt, seed + n, width, height);
      const id = newId();
      await media.write(`${id}.png`, await encode(picture));
      await media.write(`${id}-thumb.png`, await encode(shrink(picture, THUMBNAIL_SIDE)));
      outputs.push({
        id,
        name: prompt.slice(0, 100) || tool.name,
        url: media.url(`${id}.png`),
        thumbnail: media.url(`${id}-thumb.png`),
        filename: `${id}.png`,
        mediaAttributes: { mimeType: 'image/png', width, height, aspectRatio: Number((width / height).toFixed(4)) },
      });
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
