import { readAnswer } from './answer.ts';
import type { Executor } from './types.ts';

const line = (value: unknown) => new TextEncoder().encode(`${JSON.stringify(value)}\n`);

const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    const stop = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', stop, { once: true });
  });

/**
 * The demo tool's service: what a tool service written by a person answers (docs/tasks.md, "A
 * tool service"), an NDJSON body of `{progress, message}` lines as it works, then `{result}`.
 * It counts `steps` over `seconds` and stops the moment the call is given up.
 */
export function countdownAnswer(args: Record<string, unknown>, signal: AbortSignal): Response {
  const seconds = Number(args.seconds ?? 20);
  const steps = Number(args.steps ?? 10);
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      try {
        for (let step = 1; step < steps; step++) {
          await pause((seconds * 1000) / steps, signal);
          controller.enqueue(line({ progress: step / steps, message: `${step} of ${steps} steps` }));
        }
        await pause((seconds * 1000) / steps, signal);
        controller.enqueue(line({ result: { counted: steps, seconds, message: `Counted ${steps} steps in ${seconds} s` } }));
        controller.close();
      } catch (e) {
        controller.error(e);
      }
    },
  });
  return new Response(body, { headers: { 'content-type': 'application/x-ndjson' } });
}

/**
 * The demo tool (`tools/countdown.yaml`): a task that takes a while and says how far it is, so a
 * person can watch one progress and cancel it with no tool service of their own. Its answer is
 * read by the reader of remote tool services (`answer.ts`), the protocol exactly, without a socket.
 */
export const countdownExecutor: Executor = async ({ args, signal, progress }) => {
  try {
    const answer = (await readAnswer(countdownAnswer(args, signal), progress)) as { result: unknown };
    return { result: answer.result };
  } catch (e) {
    if (signal.aborted) throw signal.reason;
    throw e;
  }
};
