/** The search service's front: its rules, their inputs, and what a bulk import reports. */
export type { ImportSummary } from './importer.ts';
export { searchInput, sortDirections } from './inputs.ts';
export { searchService } from './service.ts';
export type { Scored, SearchService } from './service.ts';
export { searchStore } from './store.ts';
