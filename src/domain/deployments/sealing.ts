import type { DeploymentPlatform } from '../../generated/prisma/enums.ts';
import { badInput, unavailable } from '../core/errors.ts';
import type { SecretsInput } from './inputs.ts';
import { type Connector, PlatformUnreachable, SealBroken, type SecretSealer, SecretsRefused } from './ports.ts';
import type { DeploymentStore } from './store.ts';

/** The secrets sent for one platform. */
export const secretsOf = (sent: SecretsInput | undefined, platform: DeploymentPlatform) =>
  (sent as Partial<Record<DeploymentPlatform, Record<string, string>>> | undefined)?.[platform];

/** Checks secrets with the platform and seals them for the row `id`; their account's public name. */
export async function checkAndSeal(sealer: SecretSealer, connector: Connector, id: string, secrets: Record<string, string>) {
  if (sealer.problem) throw unavailable(sealer.problem);
  try {
    const { account } = await connector.validate(secrets);
    return { sealed: sealer.seal(JSON.stringify(secrets), id), account };
  } catch (e) {
    if (e instanceof SecretsRefused) throw badInput(e.reason, e.field.split('.'));
    if (e instanceof PlatformUnreachable) throw unavailable(e.message);
    throw e;
  }
}

/**
 * The secrets a deploy saves: those sent, checked; or, without them, the ones kept, checked
 * again when the platform refused them before (the owner may have fixed the bot).
 */
export async function secretsToDeploy(
  sealer: SecretSealer,
  connector: Connector,
  id: string,
  sent: SecretsInput | undefined,
  kept: { sealed: string | null; valid: boolean } | null,
) {
  const platform = connector.platform;
  const given = secretsOf(sent, platform);
  if (given) return checkAndSeal(sealer, connector, id, given);
  if (!kept?.sealed) throw badInput(`is required to deploy to ${platform}`, ['secrets', platform, 'token']);
  if (kept.valid) return {};
  if (sealer.problem) throw unavailable(sealer.problem);
  let opened: Record<string, string>;
  try {
    opened = JSON.parse(sealer.open(kept.sealed, id)) as Record<string, string>;
  } catch (e) {
    if (!(e instanceof SealBroken)) throw e;
    throw badInput(`the secrets kept cannot be opened (${e.message}): send them again`, ['secrets', platform]);
  }
  return checkAndSeal(sealer, connector, id, opened);
}

/** A page of rows at a time, by id, so a store of any size never sits in memory whole. */
async function resealAll(store: DeploymentStore, sealer: SecretSealer) {
  if (sealer.problem) throw unavailable(sealer.problem);
  const result = { resealed: 0, current: 0, unreadable: [] as string[] };
  for (let after: string | null = null; ; ) {
    const batch = await store.sealedAfter(after, 200);
    if (!batch.length) return result;
    for (const { id, sealed } of batch) {
      if (!sealed) continue;
      if (sealer.isCurrent(sealed)) {
        result.current++;
        continue;
      }
      try {
        // A row changed meanwhile was sealed again by that change, under the current key.
        if (await store.replaceSealed(id, sealed, sealer.seal(sealer.open(sealed, id), id))) result.resealed++;
        else result.current++;
      } catch (e) {
        if (!(e instanceof SealBroken)) throw e;
        result.unreadable.push(id);
      }
    }
    after = batch.at(-1)!.id;
  }
}

/** The sealing key's upkeep, an operator's task (`secrets.reseal`, `secrets.rotate`) rather than an owner's. */
export function keyUpkeep(store: DeploymentStore, sealer: SecretSealer) {
  return {
    /**
     * Seals every deployment's secrets again under the current key (after a key rotation):
     * how many were resealed, how many were already, and the ids of those no key here opens.
     */
    resealAll: () => resealAll(store, sealer),

    /**
     * Where the sealer keeps its key itself (the data directory's key file): a new key, every
     * secret sealed again under it, and the old keys forgotten once nothing needs them.
     */
    async rotateKey() {
      if (sealer.problem) throw unavailable(sealer.problem);
      await sealer.rotate();
      const result = await resealAll(store, sealer);
      if (!result.unreadable.length) await sealer.forgetPrevious();
      return result;
    },
  };
}
