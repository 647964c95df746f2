import type { PNG } from 'pngjs';

/** Paints a picture from a prompt (deterministic: the same prompt and seed give the same image). */
export function paint(prompt: string, seed: number, width: number, height: number): PNG;
/** The picture made smaller (each pixel the average of the area it covers). */
export function shrink(source: PNG, side: number): PNG;
