/**
 * The deployments service's front: its rules, their inputs and a deployment's state; and its
 * store, from which a composition root reads the sealed keys before it loads the sealer.
 */
export { deploySchema, platformSchema } from './inputs.ts';
export { deploymentService, stateOf } from './service.ts';
export type { DeploymentRow, DeploymentService } from './service.ts';
export { deploymentStore } from './store.ts';
export { type SealedKey, type SealedTables, sealedKeysSql, sealedTablesSql, sealedWhat } from './sealed-keys.ts';
