import { type CliIo, say } from '../io.ts';
import { progress } from '../progress.ts';
import { runCommand } from '../services.ts';

export async function secrets(io: CliIo, command: 'reseal' | 'rotate', json: boolean): Promise<number> {
  let bar: ReturnType<typeof progress> | undefined;
  let out: Awaited<ReturnType<typeof runCommand<'secrets.reseal'>>>;
  try {
    out = await runCommand(io, `secrets.${command}`, {}, (done, total) => {
      bar ??= progress(command, 'deployments', total, io.stderr);
      bar.update(done);
    });
  } finally {
    bar?.stop();
  }
  if (json) say(io, JSON.stringify(out));
  else {
    say(
      io,
      `${command === 'rotate' ? 'New key made. ' : ''}Sealed ${out.resealed} deployments' secrets again; ${out.current} already were.`,
    );
    if (out.unreadable.length)
      say(
        io,
        `No key here opens the secrets of ${out.unreadable.length} (deploy them again with their token): ${out.unreadable.join(', ')}`,
      );
  }
  return out.unreadable.length ? 1 : 0;
}
