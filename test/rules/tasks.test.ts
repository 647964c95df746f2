import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { CANCELLED, type TaskRunner } from '../../src/domain/tasks/runner.ts';
import { TASK_NOT_FOUND, taskService } from '../../src/domain/tasks/service.ts';
import { loadToolRegistry, type ToolRegistry } from '../../src/domain/tools/registry.ts';
import { memoryTaskStore, TaskBook } from './support/tasks.ts';

/**
 * The tasks' rules over a store in memory: a task priced from its tool and arguments, charged
 * as it is made (or refused with nothing taken), bounded per user, read and cancelled by its
 * owner only, its hold given back when it is cancelled.
 */
let registry: ToolRegistry;
beforeAll(async () => {
  registry = await loadToolRegistry(fileURLToPath(new URL('../../tools', import.meta.url)));
});

function world(options: { unsettledPerUser?: number } = {}) {
  const book = new TaskBook();
  const started: string[] = [];
  const aborted: string[] = [];
  const events: { userId: string; type: string }[] = [];
  const runner = {
    start: async (task: { id: string }) => void started.push(task.id),
    abort: (id: string) => void aborted.push(id),
    drain: async () => {},
  } as unknown as TaskRunner;
  const tasks = taskService({
    store: memoryTaskStore(book),
    registry,
    runnable: new Set(['flux_schnell', 'countdown']),
    runner,
    events: { publish: async (userId, event) => events.push({ userId, type: event.type }) },
    instanceId: 'instance-a',
    unsettledPerUser: options.unsettledPerUser ?? 5,
    listPageMaxBytes: 1_000_000,
    log: { error: () => {} },
  });
  // 1 subscription manna and 2 bought: four flux_schnell images (0.25 each) cost 1.
  const owner = book.user('owner', 1, 2);
  const stranger = book.user('stranger', 10, 0);
  return { book, tasks, owner, stranger, started, aborted, events };
}

const refusal = (code: string, message: string | RegExp, fieldPath?: (string | number)[]) =>
  expect.objectContaining({ code, message: typeof message === 'string' ? message : expect.stringMatching(message), fieldPath });

describe('making a task', () => {
  it('prices it from its tool and arguments, takes the price with a ledger row, and starts it', async () => {
    const { book, tasks, owner, started, events } = world();
    expect(tasks.estimate(owner, { tool: 'flux_schnell', args: { prompt: 'a fox', n_samples: 2 } })).toEqual({ cost: 0.5 });
    const made = await tasks.create(owner, { tool: 'flux_schnell', args: { prompt: 'a fox', n_samples: 2 } });
    expect(made).toMatchObject({ status: 'pending', userId: owner.id, tool: 'flux_schnell', public: false });
    expect(made.cost?.toNumber()).toBe(0.5);
    expect(book.balance(owner.id)).toBe(2.5);
    expect(book.ledger.map((r) => [r.kind, r.amount.toNumber(), r.taskId])).toEqual([['subscription', -0.5, made.id]]);
    expect(started).toEqual([made.id]);
    expect(events).toEqual([{ userId: owner.id, type: 'task_created' }]);
  });

  it('takes subscription manna first, then bought manna', async () => {
    const { book, tasks, owner } = world();
    await tasks.create(owner, { tool: 'flux_schnell', args: { prompt: 'a fox', n_samples: 8 } });
    expect(book.ledger.map((r) => [r.kind, r.amount.toNumber()])).toEqual([
      ['subscription', -1],
      ['forever', -1],
    ]);
    expect(book.balance(owner.id)).toBe(1);
  });

  it('refuses what the balance cannot cover, with the original’s words, taking nothing', async () => {
    const { book, tasks, owner, started } = world();
    await tasks.create(owner, { tool: 'flux_schnell', args: { prompt: 'a', n_samples: 8 } });
    await expect(tasks.create(owner, { tool: 'flux_schnell', args: { prompt: 'b', n_samples: 8 } })).rejects.toEqual(
      refusal('INSUFFICIENT_MANNA', 'Insufficient manna balance. Need 2 but only have 1'),
    );
    expect(book.balance(owner.id)).toBe(1);
    expect(book.tasks.size).toBe(1);
    expect(started).toHaveLength(1);
  });

  it('refuses one more task than a user may have waiting, counting only theirs and only unsettled ones', async () => {
    const { book, tasks, owner, stranger } = world({ unsettledPerUser: 2 });
    await tasks.create(stranger, { tool: 'countdown', args: { seconds: 1 } });
    const first = await tasks.create(owner, { tool: 'countdown', args: { seconds: 1 } });
    await tasks.create(owner, { tool: 'countdown', args: { seconds: 1 } });
    await expect(tasks.create(owner, { tool: 'countdown', args: { seconds: 1 } })).rejects.toEqual(
      refusal('RATE_LIMITED', 'Too many tasks waiting: at most 2 of yours may be pending or running at once'),
    );
    expect(book.tasks.size).toBe(3);
    await tasks.cancel(owner, { taskId: first.id });
    await tasks.create(owner, { tool: 'countdown', args: { seconds: 1 } });
  });

  it('names the field at fault: an unknown tool, one with no handler here, arguments out of range', async () => {
    const { book, tasks, owner } = world();
    await expect(tasks.create(owner, { args: {} })).rejects.toEqual(refusal('BAD_USER_INPUT', 'is required', ['tool']));
    await expect(tasks.create(owner, { tool: 'no_such_tool' })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'there is no tool named "no_such_tool"', ['tool']),
    );
    await expect(tasks.create(owner, { tool: 'flux_dev', args: { prompt: 'x' } })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'flux_dev cannot run on this server (it has no handler here)', ['tool']),
    );
    await expect(tasks.create(owner, { tool: 'flux_schnell', args: { prompt: 'x', n_samples: 9 } })).rejects.toEqual(
      refusal('BAD_USER_INPUT', /./, ['args', 'n_samples']),
    );
    await expect(tasks.create(owner, { tool: 'flux_schnell', args: {} })).rejects.toEqual(
      refusal('BAD_USER_INPUT', /./, ['args', 'prompt']),
    );
    expect(book.tasks.size).toBe(0);
    expect(book.ledger).toEqual([]);
  });
});

describe('what a task’s input may be', () => {
  it.each([
    ['a tool that is no string', { tool: 7 }, ['tool'], 'must be a string'],
    // Hidden helpers are for agents that enabled them, not run by themselves.
    [
      'a hidden helper run by itself',
      { tool: 'prompt_enhance', args: { prompt: 'x' } },
      ['tool'],
      'there is no tool named "prompt_enhance"',
    ],
    ['an unknown argument', { tool: 'flux_schnell', args: { prompt: 'x', colour: 'red' } }, ['args'], 'unknown argument "colour"'],
    ['arguments that are no object', { tool: 'flux_schnell', args: ['x'] }, ['args'], 'must be an object of the tool’s arguments'],
    [
      'makePublic that is no boolean',
      { tool: 'flux_schnell', args: { prompt: 'x' }, makePublic: 'yes' },
      ['makePublic'],
      'must be true or false',
    ],
    [
      'arguments over 64 KiB',
      { tool: 'flux_schnell', args: { prompt: 'x'.repeat(70_000) } },
      ['args'],
      'must be at most 65536 bytes of JSON',
    ],
    [
      'an argument of the wrong type',
      { tool: 'flux_schnell', args: { prompt: 'x', n_samples: 'two' } },
      ['args', 'n_samples'],
      'must be a number',
    ],
  ])('%s is refused on the field, saying why, with nothing taken or made', async (_label, input, fieldPath, message) => {
    const { book, tasks, owner, started } = world();
    await expect(tasks.create(owner, input)).rejects.toEqual(refusal('BAD_USER_INPUT', message, fieldPath));
    expect(book.tasks.size).toBe(0);
    expect(book.ledger).toEqual([]);
    expect(started).toEqual([]);
  });
});

describe('reading and cancelling a task', () => {
  it('shows a task to its owner, a public one to anyone, and a private one to no stranger', async () => {
    const { tasks, owner, stranger } = world();
    const hidden = await tasks.create(owner, { tool: 'countdown', args: { seconds: 1 } });
    const shown = await tasks.create(owner, { tool: 'countdown', args: { seconds: 1 }, makePublic: true });
    expect(await tasks.get(stranger, shown.id)).toMatchObject({ id: shown.id });
    await expect(tasks.get(stranger, hidden.id)).rejects.toEqual(refusal('NOT_FOUND', TASK_NOT_FOUND));
    // A watch of one task is the owner's only, public or not.
    await expect(tasks.followed(stranger, shown.id)).rejects.toEqual(refusal('NOT_FOUND', TASK_NOT_FOUND));
  });

  it('gives the hold back when its owner cancels, once', async () => {
    const { book, tasks, owner, aborted, events } = world();
    const made = await tasks.create(owner, { tool: 'flux_schnell', args: { prompt: 'a fox', n_samples: 8 } });
    expect(book.balance(owner.id)).toBe(1);
    expect(await tasks.cancel(owner, { taskId: made.id })).toEqual({ taskStatus: 'cancelled' });
    expect(book.balance(owner.id)).toBe(3);
    expect(book.tasks.get(made.id)).toMatchObject({ status: 'cancelled', error: CANCELLED });
    expect(aborted).toEqual([made.id]);
    expect(events.map((e) => e.type)).toEqual(['task_created', 'task_cancelled']);
    // Cancelled again: nothing more comes back.
    expect(await tasks.cancel(owner, { taskId: made.id })).toEqual({ taskStatus: 'cancelled' });
    expect(book.balance(owner.id)).toBe(3);
    expect(book.ledger.map((r) => r.amount.toNumber())).toEqual([-1, -1, 1, 1]);
  });

  it('leaves a task that ended as it is, its charge kept', async () => {
    const { book, tasks, owner } = world();
    const made = await tasks.create(owner, { tool: 'flux_schnell', args: { prompt: 'a fox', n_samples: 4 } });
    await memoryTaskStore(book).settle(made.id, ['pending', 'running'], { status: 'completed', result: [] });
    expect(await tasks.cancel(owner, { taskId: made.id })).toEqual({ taskStatus: 'completed' });
    expect(book.balance(owner.id)).toBe(2);
  });

  it('lets only the owner cancel: a stranger is told a private task is not there, a public one is not theirs', async () => {
    const { book, tasks, owner, stranger } = world();
    const hidden = await tasks.create(owner, { tool: 'flux_schnell', args: { prompt: 'a', n_samples: 1 } });
    const shown = await tasks.create(owner, { tool: 'flux_schnell', args: { prompt: 'b', n_samples: 1 }, makePublic: true });
    await expect(tasks.cancel(stranger, { taskId: hidden.id })).rejects.toEqual(refusal('NOT_FOUND', TASK_NOT_FOUND));
    await expect(tasks.cancel(stranger, { taskId: shown.id })).rejects.toEqual(refusal('FORBIDDEN', 'Only the task’s owner may cancel it'));
    expect([...book.tasks.values()].map((t) => t.status)).toEqual(['pending', 'pending']);
    expect(book.balance(owner.id)).toBe(2.5);
  });
});
