// Types for scripts/build.mjs (plain JavaScript: it runs before anything is compiled).
export interface Fingerprints {
  /** The compiled code's inputs. */
  code: string;
  /** The migrated snapshot's inputs. */
  snapshot: string;
  /** The browser playground's inputs. */
  playground: string;
}
export function fingerprints(): Promise<Fingerprints>;
export function readBuildInfo(): Promise<(Fingerprints & { builtAt: string }) | null>;
export function ensureBuilt(): Promise<void>;
