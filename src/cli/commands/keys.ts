import { runCommand } from '../services.ts';

export async function createKey(username: string, json: boolean): Promise<number> {
  const created = await runCommand('keys.create', { username });
  console.log(json ? JSON.stringify(created) : `API key for ${created.username} (shown once, store it now):\n${created.apiKey}`);
  return 0;
}
