import type { DeploymentPlatform } from '../core/vocabulary.ts';
import { badInput, conflict, forbidden, notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { type DeploymentConfig, deploySchema, platformSchema, updateDeploymentSchema } from './inputs.ts';
import type { Connector, SecretSealer } from './ports.ts';
import { reportedDeployments } from './reported.ts';
import { type CheckedSecrets, check, keepCurrent, keyUpkeep, type SealedRows, sealedFor, secretsOf, secretsToDeploy } from './sealing.ts';
import {
  AccountTaken,
  type ConfigJson,
  type DeploymentChange,
  type DeploymentQuery,
  type DeploymentRead,
  type DeploymentRow,
  type DeploymentStore,
  type KeptDeployment,
} from './store.ts';

export type { DeploymentRow } from './store.ts';

export const AGENT_NOT_FOUND = 'Agent not found';
export const DEPLOYMENT_NOT_FOUND = 'Deployment not found';
export const NOT_THE_OWNER = "Only the agent's owner can deploy it or change its deployments";

/** What a deployment is doing, as its owner sees it: `invalid` once the platform refused its secrets. */
export type DeploymentState = 'running' | 'stopped' | 'invalid';
export const stateOf = (d: Pick<DeploymentRow, 'valid' | 'running'>): DeploymentState =>
  !d.valid ? 'invalid' : d.running ? 'running' : 'stopped';

export interface DeploymentServiceDependencies {
  store: DeploymentStore;
  sealer: SecretSealer;
  connectors: readonly Connector[];
  /**
   * Told when a deployment changed here (`deleted`: it is gone): its runner starts or stops now,
   * its owner's feed hears of it.
   */
  changed(deployment: DeploymentRow, deleted?: boolean): void;
  /** Other rows sealed under the same key, resealed with the deployments' when the key rotates. */
  alsoSealed?: readonly SealedRows[];
}

/** `config` as written: the keys sent replace the ones kept, a key sent as null goes back to the default. */
function mergeConfig(kept: unknown, sent: DeploymentConfig | undefined): ConfigJson {
  const merged: Record<string, unknown> = { ...(typeof kept === 'object' && kept !== null && !Array.isArray(kept) ? kept : {}) };
  for (const [key, value] of Object.entries(sent ?? {})) {
    if (value === null) delete merged[key];
    else if (value !== undefined) merged[key] = value;
  }
  return merged as ConfigJson;
}

async function ownAgent(store: DeploymentStore, viewer: Viewer, agentId: string) {
  const owner = canNameARow(agentId) ? await store.agentOwner(agentId) : null;
  if (!owner) throw notFound(AGENT_NOT_FOUND);
  if (owner !== viewer.id) throw forbidden(NOT_THE_OWNER);
}

async function existing(store: DeploymentStore, agentId: string, platform: DeploymentPlatform) {
  const found = await store.forAgent(agentId, platform);
  if (!found) throw notFound(DEPLOYMENT_NOT_FOUND);
  return found;
}

function connectorFor(connectors: ReadonlyMap<DeploymentPlatform, Connector>, platform: DeploymentPlatform): Connector {
  const connector = connectors.get(platform);
  const offered = [...connectors.keys()].join(', ') || 'none';
  if (!connector) throw badInput(`deployments to ${platform} are not available yet (available: ${offered})`, ['platform']);
  return connector;
}

/**
 * Deployments of agents to platforms, for their owners only: deploy (make, or start again),
 * change, stop, delete. Secrets given are checked with the platform first (a refused one is a
 * 400 naming the field, and nothing is saved), then sealed; they are never read back out.
 */
export function deploymentService(deps: DeploymentServiceDependencies) {
  const { store, sealer } = deps;
  const connectors = new Map(deps.connectors.map((c) => [c.platform, c]));
  const reported = reportedDeployments(store, sealer);

  /** Where an account runs, as its 409 tells: the agent named to its owner only. */
  const taken = (viewer: Viewer, platform: DeploymentPlatform, checked: CheckedSecrets | null, holder: AccountTaken['holder']) => {
    const what = `${checked?.account ?? 'This account'} on ${platform}`;
    if (!holder) return conflict(`${what} was being deployed elsewhere at the same moment; try again`);
    return holder.ownerId === viewer.id
      ? conflict(
          `${what} is already deployed to your agent "${holder.agentName}" (${holder.agentId}): delete that deployment first, or deploy it there`,
        )
      : conflict(`${what} is already deployed to another user's agent: it can run in one place only`);
  };

  /**
   * Writes the agent's deployment to the platform as `decide` says, the row locked meanwhile (one
   * deployment per platform per agent, whatever arrives at once); secrets checked beforehand are
   * sealed for the row as it is then, never for an id chosen before.
   */
  async function change<Q extends DeploymentQuery>(
    viewer: Viewer,
    key: { agentId: string; platform: DeploymentPlatform },
    checked: CheckedSecrets | null,
    decide: (kept: KeptDeployment | null, sealed: () => DeploymentChange) => DeploymentChange,
    options: { create: boolean; query?: Q },
  ) {
    let sealed: { id: string; text: string } | undefined;
    const seal = (id: string) => {
      if (!checked) return {};
      const fields = sealedFor(sealer, checked, id);
      sealed = { id, text: fields.sealed };
      return fields;
    };
    let saved: DeploymentRead<Q> | null;
    try {
      saved = await store.change(
        key,
        options.create ? { userId: viewer.id } : null,
        (kept, id) => decide(kept, () => seal(id)),
        options.query,
      );
    } catch (e) {
      if (e instanceof AccountTaken) throw taken(viewer, key.platform, checked, e.holder);
      throw e;
    }
    if (!saved) throw notFound(options.create ? AGENT_NOT_FOUND : DEPLOYMENT_NOT_FOUND);
    if (sealed && checked) await keepCurrent(store, sealer, sealed.id, sealed.text, checked.secrets);
    const shown = (await reported([saved]))[0]!;
    deps.changed(shown);
    return shown;
  }

  return {
    /** One deployment, for the owner of its agent only. */
    async get<Q extends DeploymentQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<DeploymentRead<Q>> {
      const row = canNameARow(id) ? await store.findOwned(viewer.id, id, query) : null;
      if (!row) throw notFound(DEPLOYMENT_NOT_FOUND);
      return (await reported([row]))[0]!;
    },

    /** Deployments of every agent the caller owns, newest first. */
    async listMine<Q extends DeploymentQuery = object>(viewer: Viewer, query?: Q): Promise<DeploymentRead<Q>[]> {
      return reported(await store.listOwned(viewer.id, query));
    },

    /** The deployments of one agent the caller owns, newest first. */
    async listForAgent<Q extends DeploymentQuery = object>(viewer: Viewer, agentId: string, query?: Q): Promise<DeploymentRead<Q>[]> {
      await ownAgent(store, viewer, agentId);
      return reported(await store.listForAgent(agentId, query));
    },

    /** Puts the agent on a platform and starts it: a new deployment, or the one it has there, changed by what is sent. */
    async deploy<Q extends DeploymentQuery = object>(viewer: Viewer, agentId: string, raw: unknown, query?: Q) {
      const input = parseInput(deploySchema, raw);
      await ownAgent(store, viewer, agentId);
      const connector = connectorFor(connectors, input.platform);
      // Read without a lock: the platform is asked (a network call) before the row is locked.
      const seen = await store.forAgent(agentId, input.platform);
      const checked = await secretsToDeploy(sealer, connector, input.secrets, seen);
      const sent = secretsOf(input.secrets, input.platform) !== undefined;
      return change(
        viewer,
        { agentId, platform: input.platform },
        checked,
        (kept, sealed) => {
          // The secrets checked were the ones kept then: another deploy has changed them since, and checked its own.
          const stale = !sent && kept?.sealed !== seen?.sealed;
          if (!kept?.sealed && !sent) throw badInput(`is required to deploy to ${input.platform}`, ['secrets', input.platform, 'token']);
          return {
            config: mergeConfig(kept?.config, input.config),
            ...(stale ? {} : sealed()),
            running: true,
            ...(checked && !stale ? {} : { valid: kept?.valid ?? true, lastError: null }),
          };
        },
        { create: true, query },
      );
    },

    /** Changes a deployment's config or secrets (checked again), leaving it running or stopped as it was. */
    async update<Q extends DeploymentQuery = object>(viewer: Viewer, agentId: string, raw: unknown, query?: Q) {
      const input = parseInput(updateDeploymentSchema, raw);
      const sent = secretsOf(input.secrets, input.platform);
      if (input.config === undefined && sent === undefined)
        throw badInput('No deployment fields to update in the request (config, secrets)');
      await ownAgent(store, viewer, agentId);
      const connector = connectorFor(connectors, input.platform);
      await existing(store, agentId, input.platform);
      const checked = sent ? await check(sealer, connector, sent) : null;
      return change(
        viewer,
        { agentId, platform: input.platform },
        checked,
        (kept, sealed) => ({ config: mergeConfig(kept?.config, input.config), ...sealed() }),
        { create: false, query },
      );
    },

    /** Stops reading the platform (what was already read is still answered). */
    async stop<Q extends DeploymentQuery = object>(viewer: Viewer, agentId: string, raw: unknown, query?: Q) {
      const { platform } = parseInput(platformSchema, raw);
      await ownAgent(store, viewer, agentId);
      return change(viewer, { agentId, platform }, null, () => ({ running: false }), { create: false, query });
    },

    /** Deletes the deployment and its sealed secrets; the id it had. */
    async remove(viewer: Viewer, agentId: string, raw: unknown): Promise<string> {
      const { platform } = parseInput(platformSchema, raw);
      await ownAgent(store, viewer, agentId);
      const { sealed: _sealed, ...kept } = await existing(store, agentId, platform);
      if (!(await store.remove(agentId, platform))) throw notFound(DEPLOYMENT_NOT_FOUND);
      deps.changed({ ...kept, running: false }, true);
      return kept.id;
    },

    ...keyUpkeep(store, sealer, deps.alsoSealed),
  };
}

export type DeploymentService = ReturnType<typeof deploymentService>;
