import { readAnswer, ToolServiceError, toolOutput } from '../domain/tools/executors/answer.ts';
import type { Executor, ToolService } from '../domain/tools/executors/types.ts';

const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });

/**
 * Runs a tool served elsewhere: POSTs `{tool, arguments, session_id}` as JSON and reads
 * `{result, media}` back, or progress lines and then that (`readAnswer`, the domain's reading of
 * the protocol). Each attempt has a time limit; a 5xx, a network failure or a timeout is retried
 * with growing pauses; cancelling the reply or the task stops the call.
 */
export function httpExecutor({ url, timeoutMs, retries }: ToolService): Executor {
  return async ({ tool, args, sessionId, signal, progress }) => {
    for (let attempt = 0; ; attempt++) {
      try {
        const response = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify({ tool: tool.key, arguments: args, session_id: sessionId }),
          signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]),
        });
        if (!response.ok) throw new ToolServiceError(`The tool service answered HTTP ${response.status}`, response.status >= 500);
        return toolOutput(await readAnswer(response, progress), { tool, args });
      } catch (e) {
        if (signal.aborted) throw signal.reason;
        const failure =
          e instanceof ToolServiceError
            ? e
            : new ToolServiceError(
                (e as Error).name === 'TimeoutError'
                  ? `The tool service did not answer within ${timeoutMs} ms`
                  : 'Could not reach the tool service',
                true,
              );
        if (!failure.retry || attempt >= retries) throw failure;
        await pause(250 * 2 ** attempt, signal);
      }
    }
  };
}
