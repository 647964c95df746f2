// Types of cluster-files.js, plain JavaScript for the database thread.
export function isClusterSync(dir: string): boolean;
export function copyTreeSync(from: string, to: string, manifest?: string): void;
export function refreshTreeSync(from: string, to: string, manifest: string): void;
export function prepareFromSnapshot(pgdata: string, snapshot: string | false): boolean;
