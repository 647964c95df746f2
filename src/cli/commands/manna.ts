import { withServices } from '../services.ts';

export async function grant(username: string, amount: string, kind: 'subscription' | 'forever', json: boolean): Promise<number> {
  const granted = await withServices((s) => s.manna.grant(username, amount, kind));
  const out = {
    ledgerId: granted.ledgerId,
    amount: granted.amount.toNumber(),
    kind,
    subscriptionBalance: granted.subscriptionBalance.toNumber(),
    foreverBalance: granted.foreverBalance.toNumber(),
  };
  console.log(
    json
      ? JSON.stringify(out)
      : `Granted ${out.amount} ${kind} manna to ${username}: balance ${out.subscriptionBalance + out.foreverBalance} (subscription ${out.subscriptionBalance}, forever ${out.foreverBalance}).`,
  );
  return 0;
}
