import type { TaskEvents } from './events.ts';
import { SERVER_STOPPED } from './runner.ts';
import type { Task, TaskStore } from './store.ts';

/** Tasks looked at per round; the rounds go on until none is left. */
const BATCH = 200;

/**
 * Settles the tasks made by themselves that a process left pending or running (it was killed,
 * or crashed): each fails with its hold returned, and its owner's feed is told. With `instance`,
 * only that process's (one known to be gone); without, every one, which is right only when no
 * other process can be running tasks (a single instance, at start). Safe from several instances
 * at once: settling claims each task, so each hold comes back exactly once.
 */
export async function recoverAbandonedTasks(store: TaskStore, events: TaskEvents, instance?: string): Promise<Task[]> {
  const settled: Task[] = [];
  for (let settling = true; settling; ) {
    const left = await store.unsettled(instance, BATCH);
    settling = false;
    for (const task of left) {
      const saved = await store.settle(task.id, ['pending', 'running'], { status: 'failed', error: SERVER_STOPPED });
      if (!saved) continue;
      settling = true;
      settled.push(saved);
      await events.publish(saved.userId, { type: 'task_failed', taskId: saved.id, error: SERVER_STOPPED });
    }
  }
  return settled;
}

export interface DeadRunnerWatch {
  /** This process: its own tasks are never taken. */
  self: string;
  /** Of these instance ids, the ones known to be gone. */
  gone(instanceIds: string[]): Promise<string[]>;
  events: TaskEvents;
  everyMs: number;
  log: { error(obj: unknown, msg?: string): void; warn(obj: unknown, msg?: string): void };
}

/**
 * For instances sharing a database: every `everyMs`, the tasks of an instance that is gone are
 * settled as failed with their holds returned, so their owners see them end without waiting for
 * it to come back. Every instance looks; settling is safe from several at once.
 */
export function watchForDeadTaskRunners(store: TaskStore, watch: DeadRunnerWatch): () => void {
  let running: Promise<void> | null = null;
  const look = async () => {
    for (const instance of await watch.gone(await store.runners(watch.self))) {
      const settled = await recoverAbandonedTasks(store, watch.events, instance);
      if (settled.length)
        watch.log.warn(
          { instance, tasks: settled.map((t) => t.id) },
          `${settled.length} tasks left by a stopped instance were settled as failed`,
        );
    }
  };
  const timer = setInterval(() => {
    running ??= look()
      .catch((err) => watch.log.error({ err }, 'could not look for tasks of stopped instances'))
      .finally(() => (running = null));
  }, watch.everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
