import type { DeploymentPlatform } from '../../generated/prisma/enums.ts';
import { badInput, conflict, forbidden, notFound, unavailable } from '../core/errors.ts';
import { canNameARow, newId } from '../core/ids.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { type DeploymentConfig, deploySchema, platformSchema, type SecretsInput, updateDeploymentSchema } from './inputs.ts';
import { type Connector, PlatformUnreachable, SealBroken, type SecretSealer, SecretsRefused } from './ports.ts';
import {
  type ConfigJson,
  DeploymentRace,
  type DeploymentQuery,
  type DeploymentRead,
  type DeploymentRow,
  type DeploymentStore,
  type DeploymentWrite,
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
  /** Told when a deployment changed here: its runner starts or stops now, its owner's feed hears of it. */
  changed(deployment: DeploymentRow): void;
}

/** The secrets sent for one platform. */
const secretsOf = (sent: SecretsInput | undefined, platform: DeploymentPlatform) =>
  (sent as Partial<Record<DeploymentPlatform, Record<string, string>>> | undefined)?.[platform];

/** `config` as written: the keys sent replace the ones kept, a key sent as null goes back to the default. */
function mergeConfig(kept: unknown, sent: DeploymentConfig | undefined): ConfigJson {
  const merged: Record<string, unknown> = { ...(typeof kept === 'object' && kept !== null && !Array.isArray(kept) ? kept : {}) };
  for (const [key, value] of Object.entries(sent ?? {})) {
    if (value === null) delete merged[key];
    else if (value !== undefined) merged[key] = value;
  }
  return merged as ConfigJson;
}

/**
 * Deployments of agents to platforms, for their owners only: deploy (make, or start again),
 * change, stop, delete. Secrets given are checked with the platform first (a refused one is a
 * 400 naming the field, and nothing is saved), then sealed; they are never read back out.
 */
export function deploymentService(deps: DeploymentServiceDependencies) {
  const { store, sealer } = deps;
  const connectors = new Map(deps.connectors.map((c) => [c.platform, c]));

  async function ownAgent(viewer: Viewer, agentId: string) {
    const owner = canNameARow(agentId) ? await store.agentOwner(agentId) : null;
    if (!owner) throw notFound(AGENT_NOT_FOUND);
    if (owner !== viewer.id) throw forbidden(NOT_THE_OWNER);
  }

  function connectorFor(platform: DeploymentPlatform): Connector {
    const connector = connectors.get(platform);
    const offered = [...connectors.keys()].join(', ') || 'none';
    if (!connector) throw badInput(`deployments to ${platform} are not available yet (available: ${offered})`, ['platform']);
    return connector;
  }

  /** Checks secrets with the platform and seals them for the row `id`; their account's public name. */
  async function checkAndSeal(connector: Connector, id: string, secrets: Record<string, string>) {
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
  async function secretsToDeploy(
    connector: Connector,
    id: string,
    sent: SecretsInput | undefined,
    kept: { sealed: string | null; valid: boolean } | null,
  ) {
    const platform = connector.platform;
    const given = secretsOf(sent, platform);
    if (given) return checkAndSeal(connector, id, given);
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
    return checkAndSeal(connector, id, opened);
  }

  async function save<Q extends DeploymentQuery>(row: DeploymentWrite, query?: Q) {
    try {
      const saved = await store.save(row, query);
      deps.changed(saved);
      return saved;
    } catch (e) {
      if (e instanceof DeploymentRace) throw conflict(`Another request is deploying this agent to ${row.platform}; try again`);
      throw e;
    }
  }

  async function existing(agentId: string, platform: DeploymentPlatform) {
    const found = await store.forAgent(agentId, platform);
    if (!found) throw notFound(DEPLOYMENT_NOT_FOUND);
    return found;
  }

  return {
    /** One deployment, for the owner of its agent only. */
    async get<Q extends DeploymentQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<DeploymentRead<Q>> {
      const row = canNameARow(id) ? await store.findOwned(viewer.id, id, query) : null;
      if (!row) throw notFound(DEPLOYMENT_NOT_FOUND);
      return row;
    },

    /** Deployments of every agent the caller owns, newest first. */
    listMine<Q extends DeploymentQuery = object>(viewer: Viewer, query?: Q): Promise<DeploymentRead<Q>[]> {
      return store.listOwned(viewer.id, query);
    },

    /** The deployments of one agent the caller owns, newest first. */
    async listForAgent<Q extends DeploymentQuery = object>(viewer: Viewer, agentId: string, query?: Q): Promise<DeploymentRead<Q>[]> {
      await ownAgent(viewer, agentId);
      return store.listForAgent(agentId, query);
    },

    /** Puts the agent on a platform and starts it: a new deployment, or the one it has there, changed by what is sent. */
    async deploy<Q extends DeploymentQuery = object>(viewer: Viewer, agentId: string, raw: unknown, query?: Q) {
      const input = parseInput(deploySchema, raw);
      await ownAgent(viewer, agentId);
      const connector = connectorFor(input.platform);
      const kept = await store.forAgent(agentId, input.platform);
      const id = kept?.id ?? newId();
      const secrets = await secretsToDeploy(connector, id, input.secrets, kept);
      const config = mergeConfig(kept?.config, input.config);
      return save(
        { id, agentId, userId: viewer.id, platform: input.platform, config, ...secrets, running: true, valid: true, lastError: null },
        query,
      );
    },

    /** Changes a deployment's config or secrets (checked again), leaving it running or stopped as it was. */
    async update<Q extends DeploymentQuery = object>(viewer: Viewer, agentId: string, raw: unknown, query?: Q) {
      const input = parseInput(updateDeploymentSchema, raw);
      const sent = secretsOf(input.secrets, input.platform);
      if (input.config === undefined && sent === undefined)
        throw badInput('No deployment fields to update in the request (config, secrets)');
      await ownAgent(viewer, agentId);
      const connector = connectorFor(input.platform);
      const kept = await existing(agentId, input.platform);
      const secrets = sent ? { ...(await checkAndSeal(connector, kept.id, sent)), valid: true, lastError: null } : {};
      const { id, userId, platform, config } = kept;
      return save({ id, agentId, userId, platform, config: mergeConfig(config, input.config), ...secrets }, query);
    },

    /** Stops reading the platform (what was already read is still answered). */
    async stop<Q extends DeploymentQuery = object>(viewer: Viewer, agentId: string, raw: unknown, query?: Q) {
      const { platform } = parseInput(platformSchema, raw);
      await ownAgent(viewer, agentId);
      const { id, userId, config } = await existing(agentId, platform);
      return save({ id, agentId, userId, platform, config: mergeConfig(config, undefined), running: false }, query);
    },

    /** Deletes the deployment and its sealed secrets; the id it had. */
    async remove(viewer: Viewer, agentId: string, raw: unknown): Promise<string> {
      const { platform } = parseInput(platformSchema, raw);
      await ownAgent(viewer, agentId);
      const { sealed: _sealed, ...kept } = await existing(agentId, platform);
      if (!(await store.remove(agentId, platform))) throw notFound(DEPLOYMENT_NOT_FOUND);
      deps.changed({ ...kept, running: false });
      return kept.id;
    },

    /**
     * Seals every deployment's secrets again under the current key (after a key rotation):
     * how many were resealed, how many were already, and the ids of those no key here opens.
     */
    async resealAll() {
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
    },

    /**
     * Where the sealer keeps its key itself (the data directory's key file): a new key, every
     * secret sealed again under it, and the old keys forgotten once nothing needs them.
     */
    async rotateKey() {
      if (sealer.problem) throw unavailable(sealer.problem);
      await sealer.rotate();
      const result = await this.resealAll();
      if (!result.unreadable.length) await sealer.forgetPrevious();
      return result;
    },
  };
}

export type DeploymentService = ReturnType<typeof deploymentService>;
