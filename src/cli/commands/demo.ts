import { runCommand } from '../services.ts';

export async function demo(json: boolean): Promise<number> {
  const manifest = await runCommand('demo', {});
  if (json) console.log(JSON.stringify(manifest));
  else {
    console.log('Demo data loaded. API keys (shown once):');
    for (const u of manifest.users) console.log(`  ${u.username}: ${u.apiKey}`);
    console.log(
      `${manifest.agents.length} agents, ${manifest.creations.length} creations, ${manifest.sessions.length} sessions, ${manifest.shares.length} shares.`,
    );
  }
  return 0;
}
