import { type CliIo, say } from '../io.ts';
import { runCommand } from '../services.ts';

export async function createKey(io: CliIo, username: string, json: boolean): Promise<number> {
  const created = await runCommand(io, 'keys.create', { username });
  say(io, json ? JSON.stringify(created) : `API key for ${created.username} (shown once, store it now):\n${created.apiKey}`);
  return 0;
}
