import { runCommand } from '../services.ts';

export async function grant(username: string, amount: string, kind: 'subscription' | 'forever', json: boolean): Promise<number> {
  const out = await runCommand('manna.grant', { username, amount, kind });
  console.log(
    json
      ? JSON.stringify(out)
      : `Granted ${out.amount} ${kind} manna to ${username}: balance ${out.subscriptionBalance + out.foreverBalance} (subscription ${out.subscriptionBalance}, forever ${out.foreverBalance}).`,
  );
  return 0;
}
