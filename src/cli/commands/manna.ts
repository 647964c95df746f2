import { type CliIo, say } from '../io.ts';
import { runCommand } from '../services.ts';

export async function grant(io: CliIo, username: string, amount: string, kind: 'subscription' | 'forever', json: boolean): Promise<number> {
  const out = await runCommand(io, 'manna.grant', { username, amount, kind });
  say(
    io,
    json
      ? JSON.stringify(out)
      : `Granted ${out.amount} ${kind} manna to ${username}: balance ${out.subscriptionBalance + out.foreverBalance} (subscription ${out.subscriptionBalance}, forever ${out.foreverBalance}).`,
  );
  return 0;
}
