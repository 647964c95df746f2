import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { progress } from '../../src/cli/progress.ts';

/** A stream that records what is written, looking like a terminal or not. */
function stream(isTTY: boolean) {
  let text = '';
  const s = new Writable({
    write(chunk, _encoding, done) {
      text += chunk;
      done();
    },
  }) as Writable & { isTTY: boolean; columns: number };
  s.isTTY = isTTY;
  s.columns = 120;
  return { s: s as unknown as NodeJS.WriteStream, text: () => text };
}

describe('command progress', () => {
  it('draws a bar with counts, rate and ETA on a terminal', () => {
    const out = stream(true);
    const bar = progress('import', 'lines', 10, out.s);
    bar.update(4);
    bar.stop();
    expect(out.text()).toMatch(/import \[[^\]]+\] 40% \| 4\/10 lines \| \d+ lines\/s \| ETA \S+/);
  });

  it('writes plain lines elsewhere: the first update at once, and the final count on stop', () => {
    const out = stream(false);
    const bar = progress('import', 'lines', 10, out.s);
    bar.update(1);
    expect(out.text()).toMatch(/^import: 1\/10 lines \(10%\), \d+ lines\/s, ETA \S+\n$/);
    bar.update(10);
    bar.stop();
    expect(out.text().trimEnd().split('\n').at(-1)).toMatch(/^import: 10\/10 lines \(100%\), \d+ lines\/s, ETA 0s$/);
    expect(out.text()).not.toContain('\u001b[');
  });
});
