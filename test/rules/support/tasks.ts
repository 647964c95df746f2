import { Decimal } from '@prisma/client/runtime/client';
import { isNoManna, mannaFromText } from '../../../src/domain/core/manna.ts';
import type { Task, TaskStore } from '../../../src/domain/tasks/store.ts';
import { ids, TestClock } from './clock.ts';

/**
 * Tasks and their users' manna in maps, with what the Prisma store holds in SQL: a task made
 * and its hold taken together (subscription manna first, a ledger row per kind) or nothing at
 * all; a user's waiting tasks counted before one more is made; a task settled once, its hold
 * given back to the balances it came from unless it completed.
 */
export interface MemLedgerRow {
  userId: string;
  kind: 'subscription' | 'forever';
  amount: Decimal;
  taskId: string;
}

export class TaskBook {
  readonly clock = new TestClock();
  readonly tasks = new Map<string, Task>();
  readonly balances = new Map<string, { subscription: Decimal; forever: Decimal }>();
  readonly ledger: MemLedgerRow[] = [];
  readonly #taskId = ids('task');

  user(name: string, subscription = 0, forever = 0) {
    this.balances.set(`user-${name}`, { subscription: new Decimal(subscription), forever: new Decimal(forever) });
    return { id: `user-${name}` };
  }

  balance(userId: string) {
    const b = this.balances.get(userId)!;
    return b.subscription.plus(b.forever).toNumber();
  }

  newTaskId = () => this.#taskId();
}

const unsettled = (t: Task) => t.messageId === null && (t.status === 'pending' || t.status === 'running');

export function memoryTaskStore(book: TaskBook): TaskStore {
  const take = (userId: string, amount: Decimal, taskId: string) => {
    const b = book.balances.get(userId)!;
    if (b.subscription.plus(b.forever).lessThan(amount)) return false;
    const fromSubscription = Decimal.min(b.subscription, amount);
    const parts = [
      { kind: 'subscription' as const, amount: fromSubscription },
      { kind: 'forever' as const, amount: amount.minus(fromSubscription) },
    ].filter((p) => !p.amount.isZero());
    for (const p of parts) {
      b[p.kind] = b[p.kind].minus(p.amount);
      book.ledger.push({ userId, kind: p.kind, amount: p.amount.negated(), taskId });
    }
    return true;
  };
  const giveBack = (taskId: string) => {
    for (const h of book.ledger.filter((r) => r.taskId === taskId && r.amount.isNegative())) {
      const b = book.balances.get(h.userId)!;
      b[h.kind] = b[h.kind].minus(h.amount);
      book.ledger.push({ ...h, amount: h.amount.negated() });
    }
  };
  const rows = (userId: string) => [...book.tasks.values()].filter((t) => t.userId === userId);

  return {
    async create(task, maxUnsettled) {
      const waiting = rows(task.userId).filter(unsettled).length;
      if (waiting >= maxUnsettled) return { refused: 'busy', unsettled: waiting };
      const id = book.newTaskId();
      const cost = new Decimal(task.cost);
      if (!isNoManna(task.cost) && !take(task.userId, cost, id)) {
        return { refused: 'balance', balance: mannaFromText(String(book.balance(task.userId))) };
      }
      const now = book.clock.now();
      const row = {
        id,
        userId: task.userId,
        agentId: null,
        sessionId: null,
        messageId: null,
        position: null,
        callId: '',
        tool: task.tool,
        args: task.args,
        status: 'pending',
        result: null,
        cost,
        error: null,
        progress: 0,
        public: task.public,
        instance: task.instance,
        createdAt: now,
        updatedAt: now,
      } as Task;
      book.tasks.set(id, row);
      return { ...row };
    },
    async start(id) {
      const t = book.tasks.get(id);
      if (t?.status !== 'pending') return false;
      t.status = 'running';
      return true;
    },
    async progress(id, fraction) {
      const t = book.tasks.get(id);
      if (t?.status === 'running') t.progress = fraction;
    },
    async settle(id, from, outcome) {
      const t = book.tasks.get(id);
      if (!t || !from.includes(t.status)) return null;
      Object.assign(t, {
        status: outcome.status,
        result: outcome.result ?? null,
        error: outcome.error ?? null,
        updatedAt: book.clock.now(),
        ...(outcome.status === 'completed' ? { progress: 1 } : {}),
      });
      if (outcome.status !== 'completed') giveBack(id);
      return { ...t };
    },
    find: async (id) => (book.tasks.has(id) ? { ...book.tasks.get(id)! } : null) as never,
    list: async (filter) => rows(filter.userId).map((t) => ({ ...t, elided: [] })) as never,
    count: async (filter) => rows(filter.userId).length,
    ids: async (filter) => rows(filter.userId).map((t) => t.id),
    listedSizes: async (wanted) => new Map(wanted.map((id) => [id, 1000])),
    unsettled: async (instance, n) =>
      [...book.tasks.values()].filter((t) => unsettled(t) && (!instance || t.instance === instance)).slice(0, n),
    runners: async (self) => [...new Set([...book.tasks.values()].filter(unsettled).map((t) => t.instance!))].filter((i) => i !== self),
  };
}
