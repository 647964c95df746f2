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
    // The tool is the registry's, not the demo's rows: said here, where a person first tries things.
    console.log('To watch a task progress (and cancel it): the playground\'s Tasks view, tool "Countdown (demo)".');
  }
  return 0;
}
