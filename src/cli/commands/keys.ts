import { withServices } from '../services.ts';

export async function createKey(username: string, json: boolean): Promise<number> {
  const created = await withServices(async (s) => {
    const user = await s.creators.ensureUser(username);
    return { userId: user.id, username: user.username, apiKey: (await s.apiKeys.create(user.id)).apiKey };
  });
  console.log(json ? JSON.stringify(created) : `API key for ${created.username} (shown once, store it now):\n${created.apiKey}`);
  return 0;
}
