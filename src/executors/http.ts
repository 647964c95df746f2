import { type OutboundFetch, OutboundRefused } from '../domain/core/outbound.ts';
import { readAnswer, ToolServiceError, toolOutput } from '../domain/tools/executors/answer.ts';
import type { Executor, ToolService, ToolServiceClient } from '../domain/tools/executors/types.ts';

const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });

/** Why an attempt failed, as the model and the user are told it. */
function failureOf(e: unknown, timedOut: boolean, timeoutMs: number): ToolServiceError {
  if (e instanceof ToolServiceError) return e;
  // The operator's logs and start-up say which address and why; the user is told no more of the network.
  if (e instanceof OutboundRefused)
    return new ToolServiceError("The tool service's address is refused by this service's outbound rules", false);
  if (timedOut) return new ToolServiceError(`The tool service did not answer within ${timeoutMs} ms`, true);
  return new ToolServiceError('Could not reach the tool service', true);
}

/**
 * Runs tools served elsewhere: POSTs `{tool, arguments, session_id}` as JSON and reads
 * `{result, media}` back, or progress lines and then that (`readAnswer`, the domain's reading of
 * the protocol). Each call goes through `call`, the guard's (`guardedFetch`): its address checked
 * and pinned, no redirect followed (a 3xx is a failed call). Each attempt has a time limit; a 5xx,
 * a network failure or a timeout is retried with growing pauses; cancelling the reply or the task
 * stops the call.
 */
export const httpExecutor =
  (call: OutboundFetch): ToolServiceClient =>
  ({ url, timeoutMs, retries }: ToolService): Executor =>
  async ({ tool, args, sessionId, signal, progress }) => {
    for (let attempt = 0; ; attempt++) {
      const timeout = AbortSignal.timeout(timeoutMs);
      try {
        const response = await call(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify({ tool: tool.key, arguments: args, session_id: sessionId }),
          signal: AbortSignal.any([signal, timeout]),
        });
        if (!response.ok) {
          await response.body?.cancel();
          throw new ToolServiceError(`The tool service answered HTTP ${response.status}`, response.status >= 500);
        }
        return toolOutput(await readAnswer(response, progress), { tool, args });
      } catch (e) {
        if (signal.aborted) throw signal.reason;
        const failure = failureOf(e, timeout.aborted, timeoutMs);
        if (!failure.retry || attempt >= retries) throw failure;
        await pause(250 * 2 ** attempt, signal);
      }
    }
  };
