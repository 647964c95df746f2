import { describe, expect, it } from 'vitest';
import { within } from '../../src/domain/core/within.ts';

const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;

describe('within', () => {
  it('gives what the work settles to in time, and leaves no timer behind', async () => {
    const before = timers();
    await expect(within(Promise.resolve('done'), 60_000, 'late')).resolves.toBe('done');
    await expect(within(Promise.reject(new Error('refused')), 60_000, 'late')).rejects.toThrow('refused');
    // A timer left pending would hold a closing process open for the full minute.
    expect(timers()).toBe(before);
  });

  it('gives the stand-in when the work takes longer, and a late failure is not unhandled', async () => {
    let fail!: (e: Error) => void;
    const slow = new Promise<string>((_, reject) => (fail = reject));
    await expect(within(slow, 10, 'late')).resolves.toBe('late');
    fail(new Error('too late to matter'));
    // Vitest fails the run on an unhandled rejection; give it the turn in which it would show.
    await new Promise((resolve) => setImmediate(resolve));
  });
});
