import type { DeploymentPlatform } from '../core/vocabulary.ts';
import { badInput, unavailable } from '../core/errors.ts';
import type { SecretsInput } from './inputs.ts';
import { type Connector, PlatformUnreachable, SealBroken, type SecretSealer, SecretsRefused } from './ports.ts';
import type { DeploymentStore } from './store.ts';

/** The secrets sent for one platform. */
export const secretsOf = (sent: SecretsInput | undefined, platform: DeploymentPlatform) =>
  (sent as Partial<Record<DeploymentPlatform, Record<string, string>>> | undefined)?.[platform];

/** Secrets the platform accepted, in clear (in memory only, until sealed), and the account they open. */
export interface CheckedSecrets {
  secrets: Record<string, string>;
  account: string;
  accountId: string;
}

/** Checks secrets with the platform: the account they open, or a 400 naming the field it refused. */
export async function check(sealer: SecretSealer, connector: Connector, secrets: Record<string, string>): Promise<CheckedSecrets> {
  if (sealer.problem) throw unavailable(sealer.problem);
  try {
    return { secrets, ...(await connector.validate(secrets)) };
  } catch (e) {
    if (e instanceof SecretsRefused) throw badInput(e.reason, e.field.split('.'));
    if (e instanceof PlatformUnreachable) throw unavailable(e.message);
    throw e;
  }
}

/** What a deployment's row takes of checked secrets: sealed for the row `id` (and no other), with their account. */
export const sealedFor = (sealer: SecretSealer, checked: CheckedSecrets, id: string) => ({
  sealed: sealer.seal(JSON.stringify(checked.secrets), id),
  account: checked.account,
  accountId: checked.accountId,
  valid: true,
  lastError: null,
});

/**
 * The secrets a deploy saves, checked: those sent; or, without them, the ones kept, checked again
 * when the platform refused them before (the owner may have fixed the bot). Null: the ones kept
 * stay as they are.
 */
export async function secretsToDeploy(
  sealer: SecretSealer,
  connector: Connector,
  sent: SecretsInput | undefined,
  kept: { id: string; sealed: string | null; valid: boolean } | null,
): Promise<CheckedSecrets | null> {
  const platform = connector.platform;
  const given = secretsOf(sent, platform);
  if (given) return check(sealer, connector, given);
  if (!kept?.sealed) throw badInput(`is required to deploy to ${platform}`, ['secrets', platform, 'token']);
  if (kept.valid) return null;
  if (sealer.problem) throw unavailable(sealer.problem);
  let opened: Record<string, string>;
  try {
    opened = JSON.parse(sealer.open(kept.sealed, kept.id)) as Record<string, string>;
  } catch (e) {
    if (!(e instanceof SealBroken)) throw e;
    throw badInput(`the secrets kept cannot be opened (${e.message}): send them again`, ['secrets', platform]);
  }
  return check(sealer, connector, opened);
}

/**
 * Seals again, under the current key, secrets a write sealed under a key that was rotated out
 * while it was under way (the rotation's reseal may have passed the row before the write was
 * stored, and forgotten the old key since): the clear secrets are still in hand here.
 */
export async function keepCurrent(
  store: DeploymentStore,
  sealer: SecretSealer,
  id: string,
  sealed: string,
  secrets: Record<string, string>,
) {
  for (let current = sealed; !sealer.isCurrent(current); ) {
    const next = sealer.seal(JSON.stringify(secrets), id);
    // Changed meanwhile: by a write of its own, sealed under the key current then.
    if (!(await store.replaceSealed(id, current, next))) return;
    current = next;
  }
}

/** Told how many deployments a reseal has been through, of how many there are. */
export type ResealProgress = (done: number, total: number) => void;

/**
 * Other rows sealed under the same key (webhooks' secrets, `webhooks/`): paged by `id`, each value
 * opened and sealed for `boundTo` (its row), so a rotation reseals them with the deployments'.
 */
export interface SealedRows {
  count(): Promise<number>;
  sealedAfter(afterId: string | null, limit: number): Promise<{ id: string; sealed: string | null; boundTo?: string }[]>;
  replaceSealed(id: string, from: string, to: string): Promise<boolean>;
}

/**
 * A page of rows at a time, by id, so a store of any size never sits in memory whole. Each row
 * is written on its own: stopped anywhere (a crash), every row is under the key it had or the
 * new one, both still kept, and running it again goes on with those left.
 */
async function resealAll(stores: readonly SealedRows[], sealer: SecretSealer, progress: ResealProgress) {
  if (sealer.problem) throw unavailable(sealer.problem);
  const result = { resealed: 0, current: 0, unreadable: [] as string[] };
  const total = (await Promise.all(stores.map((s) => s.count()))).reduce((a, b) => a + b, 0);
  let done = 0;
  for (const store of stores) {
    for (let after: string | null = null; ; ) {
      const batch = await store.sealedAfter(after, 200);
      if (!batch.length) break;
      for (const { id, sealed, boundTo = id } of batch) {
        if (!sealed) continue;
        if (sealer.isCurrent(sealed)) {
          result.current++;
          continue;
        }
        try {
          // A row changed meanwhile was sealed again by that change, under the current key.
          if (await store.replaceSealed(id, sealed, sealer.seal(sealer.open(sealed, boundTo), boundTo))) result.resealed++;
          else result.current++;
        } catch (e) {
          if (!(e instanceof SealBroken)) throw e;
          result.unreadable.push(id);
        }
      }
      after = batch.at(-1)!.id;
      done += batch.length;
      progress(Math.min(done, total), Math.max(done, total));
    }
  }
  return result;
}

/** The sealing key's upkeep, an operator's task (`secrets.reseal`, `secrets.rotate`) rather than an owner's. */
export function keyUpkeep(store: DeploymentStore, sealer: SecretSealer, others: readonly SealedRows[] = []) {
  const stores = [store, ...others];
  return {
    /**
     * Seals every deployment's secrets again under the current key (after a key rotation):
     * how many were resealed, how many were already, and the ids of those no key here opens.
     */
    resealAll: (progress: ResealProgress = () => {}) => resealAll(stores, sealer, progress),

    /**
     * Where the sealer keeps its key itself (the data directory's key file): a new key, every
     * secret sealed again under it, and the old keys forgotten once nothing needs them.
     */
    async rotateKey(progress: ResealProgress = () => {}) {
      if (sealer.problem) throw unavailable(sealer.problem);
      await sealer.rotate();
      const result = await resealAll(stores, sealer, progress);
      if (!result.unreadable.length) await sealer.forgetPrevious();
      return result;
    },
  };
}
