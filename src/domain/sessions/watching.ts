import type { EventBus } from '../core/bus.ts';
import { notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import type { StreamLimits } from '../core/stream-limits.ts';
import type { Viewer } from '../core/viewer.ts';
import { SESSION_NOT_FOUND, type SessionAccess } from '../access/service.ts';
import type { AccessGate } from '../access/gate.ts';
import type { PromptStarted } from './prompting.ts';
import { KEY_DELETED_END, watchStream, type WatchStream } from '../core/watch.ts';
import { sessionWatchStep } from './stream.ts';

export interface WatchDependencies {
  bus: EventBus;
  limits: StreamLimits;
  gate: Pick<AccessGate, 'open'>;
  access: SessionAccess;
  send(viewer: Viewer, raw: unknown, options: { confirmKey?: boolean }): Promise<PromptStarted>;
}

/** Live events of sessions, each watch holding one of the slots its caller's key may have open. */
export function watchRules({ bus, limits, gate, access, send }: WatchDependencies) {
  /**
   * A watch for someone whose access was checked just now; `release` gives its slots back when it
   * ends. `keyConfirmed`: the caller's key was seen to exist after a listener for its deletion was
   * already in place (see `sendAndWatch`), so it need not be looked up again.
   */
  function openWatch(
    viewer: Viewer,
    sessionId: string,
    options: { after?: number; promptId?: string; keyConfirmed?: boolean },
    release: () => void,
  ): WatchStream {
    let stopListening = () => {};
    const ticket = gate.open(viewer, sessionId, (end) => stream.interrupt(end));
    const stream = watchStream(
      bus.subscribe(sessionId, { after: options.after }),
      sessionWatchStep(viewer.id, options.promptId ?? null),
      () => {
        stopListening();
        ticket.close();
        release();
      },
      ticket.admit,
    );
    // A deleted API key ends what was opened with it, on every transport. The key was checked
    // when the request began; one deleted since, before this listener, is caught by looking again.
    stopListening = bus.onKeyRevoked((keyId) => {
      if (keyId === viewer.keyId) stream.interrupt(KEY_DELETED_END);
    });
    if (!options.keyConfirmed) ticket.confirmKey();
    return stream;
  }

  return {
    /**
     * Live events of a session for someone with access: replayed from after `after` when given,
     * then live. It ends with a reason when the session is deleted or the watcher removed.
     * With `promptId`, only that prompt's events, ending with its `end_prompt`. It holds one of
     * the subscriptions the caller's key may have open until it ends.
     */
    async watch(viewer: Viewer, sessionId: string, options: { after?: number; promptId?: string } = {}): Promise<WatchStream> {
      if (!canNameARow(sessionId)) throw notFound(SESSION_NOT_FOUND);
      // Where the watch starts is fixed before access is checked: a removal that commits after the
      // check is published after this point, so the watch sees it; one before fails the check.
      const after = options.after ?? (await bus.position(sessionId));
      await access.requireAccess(viewer, sessionId);
      return openWatch(viewer, sessionId, { ...options, after }, await limits.hold(viewer, 'subscription'));
    },

    /**
     * Sends a prompt and watches its replies: what `stream: true` and `Subscription.sendMessage`
     * do. The caller's stream slot is taken first, so a stream refused saves no prompt.
     */
    async sendAndWatch(viewer: Viewer, raw: unknown) {
      const release = await limits.hold(viewer, 'stream');
      // The key's deletion is listened for before the prompt is saved, and the save checks that
      // the key still exists: a deletion either stops the save or is heard here, with no lookup
      // of the key after the save.
      let keyDeleted = false;
      const stopListening = viewer.keyId
        ? bus.onKeyRevoked((keyId) => {
            if (keyId === viewer.keyId) keyDeleted = true;
          })
        : () => {};
      let started: PromptStarted;
      try {
        started = await send(viewer, raw, { confirmKey: true });
      } catch (e) {
        stopListening();
        release();
        throw e;
      }
      if (!started.promptId) {
        stopListening();
        release();
        return { started, events: null };
      }
      // The prompt was just accepted from this caller, so their access was checked.
      const { sessionId, startSeq, promptId } = started;
      const events = openWatch(viewer, sessionId, { after: startSeq! - 1, promptId, keyConfirmed: true }, release);
      stopListening();
      if (keyDeleted) events.interrupt(KEY_DELETED_END);
      return { started, events };
    },
  };
}
