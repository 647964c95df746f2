import { SingleBar } from 'cli-progress';

export interface Progress {
  update(done: number): void;
  stop(): void;
}

const seconds = (s: number) =>
  !Number.isFinite(s)
    ? '?'
    : s >= 3600
      ? `${Math.floor(s / 3600)}h${Math.round((s % 3600) / 60)}m`
      : s >= 60
        ? `${Math.floor(s / 60)}m${Math.round(s % 60)}s`
        : `${Math.round(s)}s`;

/**
 * Progress of a long command on stderr: a bar with rate and ETA on a terminal (cli-progress),
 * and where output goes to a file or a pipe, plain lines a log can keep (the first at once, then
 * at most one a second, and the last).
 */
export function progress(label: string, unit: string, total: number, stream: NodeJS.WritableStream & { isTTY?: boolean }): Progress {
  const started = performance.now();
  if (stream.isTTY) {
    const bar = new SingleBar({
      stream,
      format: `${label} [{bar}] {percentage}% | {value}/{total} ${unit} | {rate} ${unit}/s | ETA {eta_formatted}`,
      hideCursor: true,
      etaBuffer: 50,
    });
    bar.start(total, 0, { rate: 0 });
    return {
      update: (done) => bar.update(done, { rate: Math.round(done / ((performance.now() - started) / 1000) || 0) }),
      stop: () => bar.stop(),
    };
  }
  let lastLine = -Infinity;
  let last = 0;
  const line = (done: number) => {
    const elapsed = (performance.now() - started) / 1000;
    const rate = done / elapsed;
    const percent = total ? Math.floor((done / total) * 100) : 100;
    stream.write(
      `${label}: ${done}/${total} ${unit} (${percent}%), ${Math.round(rate)} ${unit}/s, ETA ${seconds((total - done) / rate)}\n`,
    );
    lastLine = performance.now();
  };
  return {
    update(done) {
      last = done;
      if (performance.now() - lastLine >= 1000) line(done);
    },
    stop: () => line(last),
  };
}
