import type { DeploymentPlatform } from '../core/vocabulary.ts';
import { type Connector, type PlatformSecrets, SealBroken, type SecretSealer } from './ports.ts';
import type { RelayRules } from './relay.ts';
import { type Runner, type RunnerDependencies, startRunner } from './runner.ts';
import type { DeploymentRuntimeStore, HeldDeployment } from './runtime-store.ts';

/** How long a deployment whose secrets cannot be opened here is left alone before it is tried again. */
const COOLDOWN_MS = 60_000;

export interface RuntimeDependencies {
  store: DeploymentRuntimeStore;
  relay: RelayRules;
  connectors: readonly Connector[];
  sealer: SecretSealer;
  instanceId: string;
  leaseMs: number;
  log: RunnerDependencies['log'] & { info?(obj: unknown, msg?: string): void };
  pause: RunnerDependencies['pause'];
  /** A deployment's state changed by itself (its secrets refused): its owner is told. */
  changed(deploymentId: string): Promise<void>;
}

/** Opens a deployment's sealed secrets for its runner. Throws SealBroken. */
function openSecrets(sealer: SecretSealer, held: HeldDeployment): PlatformSecrets {
  if (!held.sealed) throw new SealBroken('it has no secrets');
  const secrets = JSON.parse(sealer.open(held.sealed, held.id)) as unknown;
  if (typeof secrets !== 'object' || secrets === null) throw new SealBroken('its secrets are not an object');
  return secrets as PlatformSecrets;
}

/** Whether the deployment's sealed secrets are `secrets` (sealed anew: a reseal, the same token deployed again). */
function sealsTheSame(sealer: SecretSealer, held: HeldDeployment, secrets: string) {
  try {
    return JSON.stringify(openSecrets(sealer, held)) === secrets;
  } catch (e) {
    if (e instanceof SealBroken) return false;
    throw e;
  }
}

/**
 * Runs the deployments this instance holds the lease of. Every third of `leaseMs` it renews its
 * leases and takes those nobody holds any more (an instance that died), in one statement
 * (`claim`), and starts or stops runners to match: exactly one instance reads a deployment's
 * updates, and another takes over within `leaseMs` of its holder's death. A runner whose lease
 * was not renewed in time stops by itself, whatever the database says later.
 */
export function deploymentRuntime(deps: RuntimeDependencies) {
  const { store, sealer, log } = deps;
  const connectors = new Map<DeploymentPlatform, Connector>(deps.connectors.map((c) => [c.platform, c]));
  const platforms = [...connectors.keys()];
  const runners = new Map<string, Runner>();
  const cooling = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;
  let ticking: Promise<void> | null = null;
  let again = false;
  let closing = false;

  const runnerDeps: RunnerDependencies = {
    store,
    relay: deps.relay,
    instanceId: deps.instanceId,
    log,
    pause: deps.pause,
    async revoked(held, reason) {
      await store.invalidate(held.id, reason);
      log.warn({ deployment: held.id }, `deployment stopped: ${reason}`);
      await deps.changed(held.id).catch((err) => log.error({ err }, 'could not tell the owner of a deployment'));
      nudge();
    },
  };

  async function start(held: HeldDeployment, holdUntil: number) {
    let secrets: PlatformSecrets;
    try {
      secrets = openSecrets(sealer, held);
    } catch (e) {
      if (!(e instanceof SealBroken)) throw e;
      cooling.set(held.id, Date.now() + COOLDOWN_MS);
      await store.cannotOpen(held.id, `Its secrets cannot be opened (${e.message}): deploy it again with them`);
      await store.release(deps.instanceId, held.id);
      return;
    }
    // A run starts afresh: what an earlier one failed at (its secrets not opened without their key, say) is not this one's.
    await store.noteError(held.id, null);
    runners.set(held.id, startRunner(runnerDeps, held, secrets, connectors.get(held.platform)!, holdUntil));
    log.info?.({ deployment: held.id, instance: deps.instanceId }, 'deployment: reading its updates on this instance');
  }

  async function tick() {
    const asked = Date.now();
    for (const [id, until] of cooling) if (until < asked) cooling.delete(id);
    let held: HeldDeployment[];
    try {
      held = await store.claim(deps.instanceId, deps.leaseMs, platforms, [...cooling.keys()]);
    } catch (err) {
      log.error({ err }, 'could not renew the leases of deployments');
      // Runners whose lease may have run out by now stop; the others go on until theirs does.
      const now = Date.now();
      for (const [id, runner] of [...runners]) if (runner.holdUntil <= now) await stopRunner(id);
      return;
    }
    // The lease ends `leaseMs` after the database's clock read it, which is after `asked`: a tenth kept as margin.
    const holdUntil = asked + deps.leaseMs * 0.9;
    const holding = new Set(held.map((h) => h.id));
    for (const id of [...runners.keys()]) if (!holding.has(id)) await stopRunner(id);
    for (const h of held) {
      const runner = runners.get(h.id);
      if (runner && !runner.ended && runner.version !== h.version && sealsTheSame(sealer, h, runner.secrets)) runner.version = h.version;
      if (runner && (runner.ended || runner.version !== h.version)) await stopRunner(h.id);
      const current = runners.get(h.id);
      if (current) current.holdUntil = holdUntil;
      else if (!closing) await start(h, holdUntil);
    }
  }

  async function stopRunner(id: string) {
    const runner = runners.get(id);
    runners.delete(id);
    await runner?.stop();
  }

  /** Runs a tick now (or right after the one under way). */
  function nudge() {
    if (closing) return;
    if (ticking) {
      again = true;
      return;
    }
    ticking = tick()
      .catch((err) => log.error({ err }, 'deployments: a lease round failed'))
      .finally(() => {
        ticking = null;
        if (again) {
          again = false;
          nudge();
        }
      });
  }

  return {
    /** Starts taking and renewing leases; without a key for the secrets, nothing runs here and the log says why. */
    start() {
      if (sealer.problem) {
        log.warn({}, `deployments do not run on this instance: ${sealer.problem}`);
        return;
      }
      if (!platforms.length) return;
      nudge();
      timer = setInterval(nudge, Math.max(100, Math.floor(deps.leaseMs / 3)));
      timer.unref();
    },
    /** A deployment changed here (deployed, stopped, deleted): its runner starts or stops now, not at the next round. */
    nudge,
    /** Takes no more updates; answers under way go on (a shutdown lets replies finish first). */
    async quiesce() {
      closing = true;
      clearInterval(timer);
      await ticking;
      await Promise.all([...runners.values()].map((r) => r.quiesce()));
    },
    /** Stops every runner and gives up the leases, so another instance takes over at once. */
    async stop() {
      closing = true;
      clearInterval(timer);
      await ticking;
      await Promise.all([...runners.keys()].map(stopRunner));
      await store.release(deps.instanceId).catch((err) => log.error({ err }, 'could not give up the leases of deployments'));
    },
    /** For tests and metrics: the deployments this instance runs now. */
    running: () => [...runners.keys()],
  };
}

export type DeploymentRuntime = ReturnType<typeof deploymentRuntime>;
