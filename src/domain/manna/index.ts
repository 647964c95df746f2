/**
 * The manna service's front: its rules, an amount's rule, and the ledger's credit for a loader
 * that writes its rows in one transaction of its own (the demo data set).
 */
export { prismaMannaStore } from './prisma-store.ts';
export { amountSchema, mannaService } from './service.ts';
export type { MannaService } from './service.ts';
export { credit } from './stores/ledger.ts';
