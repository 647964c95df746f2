import { Worker } from 'node:worker_threads';
import {
  DriverAdapterError,
  type ConnectionInfo,
  type IsolationLevel,
  type SqlDriverAdapter,
  type SqlMigrationAwareDriverAdapterFactory,
  type SqlQuery,
  type SqlResultSet,
  type Transaction,
  type TransactionOptions,
} from '@prisma/driver-adapter-utils';
import type { Sql, SqlDatabase } from './sql.ts';

interface Reply {
  id: number;
  value?: unknown;
  error?: {
    name: string;
    message: string;
    code?: string;
    detail?: string;
    hint?: string;
    cause?: ConstructorParameters<typeof DriverAdapterError>[0];
  };
}

/** Calls into the database thread; each call resolves with its reply. */
export class Channel {
  private next = 0;
  private readonly pending = new Map<number, { resolve(v: unknown): void; reject(e: unknown): void }>();

  constructor(private readonly worker: Worker) {
    worker.on('message', (reply: Reply) => {
      const call = this.pending.get(reply.id);
      if (!call) return;
      this.pending.delete(reply.id);
      if (!reply.error) return call.resolve(reply.value);
      const { name, message, code, detail, hint, cause } = reply.error;
      call.reject(cause ? new DriverAdapterError(cause) : Object.assign(new Error(message), { name, code, detail, hint }));
    });
    worker.on('exit', () => this.failAll(new Error('The database thread stopped')));
    worker.on('error', (e) => this.failAll(e));
  }

  call<T>(op: string, args: object = {}): Promise<T> {
    const id = ++this.next;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.worker.postMessage({ id, op, args });
    });
  }

  private failAll(e: unknown) {
    for (const call of this.pending.values()) call.reject(e);
    this.pending.clear();
  }
}

interface Connected {
  handle: number;
  provider: 'postgres';
  adapterName: string;
  connectionInfo?: ConnectionInfo;
}

/** Queries and statements of an adapter or a transaction living in the database thread. */
class RemoteQueryable {
  readonly provider = 'postgres' as const;

  constructor(
    protected readonly channel: Channel,
    protected readonly handle: number,
    readonly adapterName: string,
  ) {}

  queryRaw(query: SqlQuery): Promise<SqlResultSet> {
    return this.channel.call('queryRaw', { handle: this.handle, query });
  }

  executeRaw(query: SqlQuery): Promise<number> {
    return this.channel.call('executeRaw', { handle: this.handle, query });
  }
}

class RemoteTransaction extends RemoteQueryable implements Transaction {
  constructor(
    channel: Channel,
    handle: number,
    adapterName: string,
    readonly options: TransactionOptions,
  ) {
    super(channel, handle, adapterName);
  }

  commit(): Promise<void> {
    return this.channel.call('commit', { handle: this.handle });
  }

  rollback(): Promise<void> {
    return this.channel.call('rollback', { handle: this.handle });
  }
}

class RemoteAdapter extends RemoteQueryable implements SqlDriverAdapter {
  constructor(
    channel: Channel,
    private readonly connected: Connected,
  ) {
    super(channel, connected.handle, connected.adapterName);
  }

  executeScript(script: string): Promise<void> {
    return this.channel.call('executeScript', { handle: this.handle, script });
  }

  async startTransaction(isolationLevel?: IsolationLevel): Promise<Transaction> {
    const tx = await this.channel.call<{ handle: number; options: TransactionOptions }>('startTransaction', {
      handle: this.handle,
      isolationLevel,
    });
    return new RemoteTransaction(this.channel, tx.handle, this.adapterName, tx.options);
  }

  getConnectionInfo(): ConnectionInfo {
    return this.connected.connectionInfo ?? { supportsRelationJoins: true };
  }

  dispose(): Promise<void> {
    return this.channel.call('dispose', { handle: this.handle });
  }
}

/** Plain SQL on the database thread, beside Prisma's adapter (see sql.ts); the embedded database's. */
export function plainSql(channel: Channel): SqlDatabase {
  return {
    rows: (sql, params = []) => channel.call('rows', { sql, params }),
    exec: (script) => channel.call('exec', { script }),
    async transaction(work) {
      const handle = await channel.call<number>('begin');
      const tx: Sql = {
        rows: (sql, params = []) => channel.call('txRows', { handle, sql, params }),
        exec: (script) => channel.call('txExec', { handle, script }),
      };
      let result;
      try {
        result = await work(tx);
      } catch (e) {
        // The failure that made it roll back is the one to report.
        await channel.call('end', { handle, commit: false }).catch(() => {});
        throw e;
      }
      await channel.call('end', { handle, commit: true });
      return result;
    },
  };
}

/**
 * Starts a database's driver adapter on a worker thread (`pglite-worker.js`: the embedded
 * database; `pg-worker.js`: a PostgreSQL server's connections) and returns at once a Prisma
 * driver-adapter factory that forwards to it, and `ready`, which settles when the worker has
 * started (calls made before wait in the thread's queue). Statements, and the parsing and
 * converting of their results, then run beside the event loop instead of on it, so a burst of
 * writes does not hold up the tokens of every reply being streamed; and the caller can go on
 * with its own start-up meanwhile. `ready` gives what the worker said when it started.
 */
export function startAdapterThread(script: URL, workerData: object, adapterName: string) {
  const worker = new Worker(script, { workerData });
  const ready = new Promise<Record<string, unknown>>((resolve, reject) => {
    worker.once('message', (m: { ready: boolean; error?: { message: string } }) =>
      m.ready ? resolve(m) : reject(new Error(m.error?.message ?? 'The database thread did not start')),
    );
    worker.once('error', reject);
  });
  // Reported to whoever awaits `ready`, which a service started early does only once its modules
  // have loaded: until then a failure must not count as unhandled (which ends the process).
  ready.catch(() => {});
  const channel = new Channel(worker);
  const factory: SqlMigrationAwareDriverAdapterFactory = {
    provider: 'postgres',
    adapterName,
    connect: async () => new RemoteAdapter(channel, await channel.call<Connected>('connect')),
    connectToShadowDb: async () => new RemoteAdapter(channel, await channel.call<Connected>('connectToShadowDb')),
  };
  return {
    factory,
    ready,
    channel,
    /** Runs the job queue's SQL (one statement with parameters, or a script without) on the database thread. */
    executeSql: (text: string, values?: unknown[]) => channel.call<{ rows: any[] }>('jobSql', { text, values }),
    async close() {
      await channel.call('close');
      await worker.terminate();
    },
    /** For a start-up that failed: no clean shutdown (the thread may not even have started). */
    stop: () => worker.terminate(),
  };
}
