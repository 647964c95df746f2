import { runCommand } from '../services.ts';

export async function secrets(command: 'reseal' | 'rotate', json: boolean): Promise<number> {
  const out = await runCommand(`secrets.${command}`, {});
  if (json) console.log(JSON.stringify(out));
  else {
    console.log(
      `${command === 'rotate' ? 'New key made. ' : ''}Sealed ${out.resealed} deployments' secrets again; ${out.current} already were.`,
    );
    if (out.unreadable.length)
      console.log(
        `No key here opens the secrets of ${out.unreadable.length} (deploy them again with their token): ${out.unreadable.join(', ')}`,
      );
  }
  return out.unreadable.length ? 1 : 0;
}
