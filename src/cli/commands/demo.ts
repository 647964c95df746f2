import { type CliIo, say } from '../io.ts';
import { runCommand } from '../services.ts';

export async function demo(io: CliIo, json: boolean): Promise<number> {
  const manifest = await runCommand(io, 'demo', {});
  if (json) say(io, JSON.stringify(manifest));
  else {
    say(io, 'Demo data loaded. API keys (shown once):');
    for (const u of manifest.users) say(io, `  ${u.username}: ${u.apiKey}`);
    say(
      io,
      `${manifest.agents.length} agents, ${manifest.creations.length} creations, ${manifest.sessions.length} sessions, ${manifest.shares.length} shares.`,
    );
    // The tool is the registry's, not the demo's rows: said here, where a person first tries things.
    console.log('To watch a task progress (and cancel it): the playground\'s Tasks view, tool "Countdown (demo)".');
  }
  return 0;
}
