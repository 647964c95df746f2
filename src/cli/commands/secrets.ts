import { type CliIo, say } from '../io.ts';
import { runCommand } from '../services.ts';

export async function secrets(io: CliIo, command: 'reseal' | 'rotate', json: boolean): Promise<number> {
  const out = await runCommand(io, `secrets.${command}`, {});
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
