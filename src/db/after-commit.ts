/**
 * Signals sent once a transaction has committed: a change marks the transaction it writes in
 * with what it made (`signalOnCommit`), and the client that ran it tells the listeners of that
 * signal (`onCommitted`) after the commit, never after a rollback. A listener that acts at once
 * (a webhook's deliverer handing the new deliveries to the queue) so acts on rows others can
 * read, and work that nothing recorded costs no poll.
 */
type Listener = (values: unknown[]) => void;

const marked = new WeakMap<object, Map<string, unknown[]>>();
const listenersOf = new WeakMap<object, Map<string, Set<Listener>>>();

/** Marks `tx` so that the listeners of `signal` on its client hear of `values` once it commits. */
export function signalOnCommit(tx: object, signal: string, ...values: unknown[]): void {
  const signals = marked.get(tx) ?? new Map<string, unknown[]>();
  signals.set(signal, [...(signals.get(signal) ?? []), ...values]);
  marked.set(tx, signals);
}

/**
 * Calls `listener` after each transaction of `client` that committed marked with `signal`, with
 * the values it was marked with, in order; returns how to stop.
 */
export function onCommitted<T>(client: object, signal: string, listener: (values: T[]) => void): () => void {
  const listeners = listenersOf.get(client) ?? new Map<string, Set<Listener>>();
  listenersOf.set(client, listeners);
  const set = listeners.get(signal) ?? new Set<Listener>();
  listeners.set(signal, set);
  set.add(listener as Listener);
  return () => set.delete(listener as Listener);
}

function committed(client: object, tx: object) {
  const signals = marked.get(tx);
  if (!signals) return;
  marked.delete(tx);
  for (const [signal, values] of signals) for (const listener of listenersOf.get(client)?.get(signal) ?? []) listener(values);
}

interface Transacting {
  $transaction(work: unknown, options?: unknown): Promise<unknown>;
}

/**
 * The client, its interactive transactions telling their signals once they commit. Its `$transaction`
 * is wrapped rather than each store's: every store writes through this one client.
 */
export function withCommitSignals<C extends Transacting>(client: C): C {
  const run = client.$transaction.bind(client);
  const wrapped = (work: unknown, options?: unknown) => {
    if (typeof work !== 'function') return run(work, options);
    let tx: object | undefined;
    return run((t: object) => {
      tx = t;
      return work(t);
    }, options).then((value) => {
      if (tx) committed(client, tx);
      return value;
    });
  };
  Object.defineProperty(client, '$transaction', { value: wrapped, configurable: true, writable: true });
  return client;
}
