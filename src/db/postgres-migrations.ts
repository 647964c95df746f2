import { PrismaPg } from '@prisma/adapter-pg';
import type pg from 'pg';

/**
 * The adapter the schema engine migrates PostgreSQL through. `@prisma/adapter-pg` runs a
 * migration script by splitting it on every ";", which breaks `DO $$ ... $$` blocks (our
 * conditional pgvector column) and semicolons in comments. PostgreSQL's simple-query protocol
 * runs a whole script as written, so scripts are sent in one piece instead.
 */
export class PostgresMigrationAdapterFactory extends PrismaPg {
  override async connect() {
    const adapter = await super.connect();
    const internals = adapter as unknown as { client: pg.Pool; onError(e: unknown): never };
    return new Proxy(adapter, {
      get(target, property) {
        if (property === 'executeScript') {
          return async (script: string) => {
            try {
              await internals.client.query(script);
            } catch (e) {
              internals.onError(e);
            }
          };
        }
        const value = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  }
}
