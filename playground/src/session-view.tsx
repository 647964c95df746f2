import type { Client } from 'graphql-ws';
import { useEffect, useRef, useState } from 'preact/hooks';
import { describeProblem, type Problem, problemOf, request } from './api.ts';
import {
  type Agent,
  CANCEL,
  EVENTS,
  type Message,
  REACT,
  SEND,
  SESSION,
  type SessionEvent,
  SETTLE_APPROVAL,
  SHARE,
  type ToolCall,
} from './operations.ts';
import { applyEvent, forget, fromMessages, type SessionState, save, saved, withCall } from './session-state.ts';

// Text, not emoji: the page must read the same where no emoji font is installed.
const REACTIONS: [string, string][] = [
  ['thumbs_up', '+1'],
  ['thumbs_down', '−1'],
  ['❤️', '♥'],
];

/** Pictures a tool made: its result's `media` (served by parley under /media/). */
function pictures(result: unknown): string[] {
  const media = (result as { media?: { url?: string; thumbnail?: string }[] } | null)?.media;
  return Array.isArray(media) ? media.flatMap((m) => ((m.thumbnail ?? m.url) ? [(m.thumbnail ?? m.url)!] : [])) : [];
}

const OUTCOMES: Record<string, string> = {
  APPROVED: 'approved',
  DENIED: 'denied',
  EXPIRED: 'not answered in time: denied',
};

/** A call that waits for the viewer's yes: its price, when it counts as denied, and Approve / Deny (with a reason). */
function ApprovalCard({ call, onSettle }: { call: ToolCall; onSettle: (approve: boolean, reason: string) => Promise<void> }) {
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const settle = async (approve: boolean) => {
    setBusy(true);
    try {
      await onSettle(approve, reason.trim());
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="approval-card" data-call-id={call.id}>
      <p>
        Waits for your approval: <strong>{call.tool}</strong> for <span class="price">{call.cost ?? '?'} manna</span>.
      </p>
      <p class="muted expires">
        {call.expiresAt
          ? `Unanswered by ${new Date(call.expiresAt).toLocaleString()}, it counts as denied.`
          : "Unanswered before the agent's timeout, it counts as denied."}
      </p>
      <input
        name="reason"
        placeholder="Why (optional, told to the agent on a denial)"
        value={reason}
        maxLength={1000}
        onInput={(e) => setReason(e.currentTarget.value)}
      />
      <button type="button" name="approve" disabled={busy} onClick={() => settle(true)}>
        Approve
      </button>
      <button type="button" name="deny" disabled={busy} onClick={() => settle(false)}>
        Deny
      </button>
    </div>
  );
}

function ToolCallView({ call, onSettle }: { call: ToolCall; onSettle: (approve: boolean, reason: string) => Promise<void> }) {
  const outcome = call.approval ? OUTCOMES[call.approval] : undefined;
  return (
    <details class="tool-call" data-tool={call.tool} data-status={call.status} data-approval={call.approval ?? ''} open>
      <summary>
        🛠 {call.tool} <span class="muted">{call.status.toLowerCase().replace('_', ' ')}</span>
        {outcome && <span class="approval-outcome"> ({outcome})</span>}
      </summary>
      <pre>{JSON.stringify(call.args, null, 2)}</pre>
      {call.status === 'AWAITING_APPROVAL' && <ApprovalCard call={call} onSettle={onSettle} />}
      {call.error && <p class="error">{call.error}</p>}
      {pictures(call.result).map((src) => (
        <img key={src} src={src} alt={`made by ${call.tool}`} loading="lazy" />
      ))}
      {call.result !== null && call.result !== undefined && !pictures(call.result).length && (
        <pre>{JSON.stringify(call.result, null, 2)}</pre>
      )}
    </details>
  );
}

function MessageView({
  message,
  waiting,
  onReact,
  onSettle,
}: {
  message: Message;
  waiting: boolean;
  onReact: (reaction: string) => void;
  onSettle: (callId: string, approve: boolean, reason: string) => Promise<void>;
}) {
  const mine = message.role === 'USER';
  const who = mine ? (message.sender?.username ?? 'you') : (message.agent?.name ?? message.role.toLowerCase());
  return (
    <article
      class={`message ${mine ? 'from-user' : 'from-agent'}`}
      data-message-id={message.id}
      data-status={message.status}
      data-role={message.role}
    >
      <header>
        <strong>{who}</strong>{' '}
        {message.status === 'STREAMING' && <span class="typing">{waiting ? 'waiting for the reply before' : 'writing…'}</span>}
        {message.status !== 'STREAMING' && message.status !== 'COMPLETE' && <span class="muted">{message.status.toLowerCase()}</span>}
      </header>
      {message.thought && (
        <details class="thought">
          <summary>thinking</summary>
          <p>{message.thought}</p>
        </details>
      )}
      {message.toolCalls.map((c) => (
        <ToolCallView key={c.id} call={c} onSettle={(approve, reason) => onSettle(c.id, approve, reason)} />
      ))}
      <div class="content">{message.content}</div>
      {/* A reply stopped by a newer prompt is how the person wanted it, not a failure. */}
      {message.error && <p class={message.status === 'INTERRUPTED' ? 'muted stopped' : 'error'}>{message.error}</p>}
      <footer class="reactions">
        {REACTIONS.map(([name, emoji]) => {
          const r = message.reactions.find((x) => x.reaction === name);
          return (
            <button
              key={name}
              type="button"
              class={r?.reactedByMe ? 'reaction mine' : 'reaction'}
              data-reaction={name}
              aria-pressed={r?.reactedByMe ?? false}
              onClick={() => onReact(name)}
            >
              {emoji} {r?.count || ''}
            </button>
          );
        })}
      </footer>
    </article>
  );
}

/**
 * Replies that wait for an earlier prompt's reply to end (prompts sent while one was written are
 * answered in order): the page says they wait rather than that they are being written.
 */
function waitingReplies(messages: Message[]): Set<string> {
  const streaming = messages.filter((m) => m.role === 'ASSISTANT' && m.status === 'STREAMING');
  const first = streaming[0]?.promptId;
  return new Set(streaming.filter((m) => m.promptId !== first).map((m) => m.id));
}

type WhileReplying = 'ENQUEUE' | 'INTERRUPT' | 'ROLLBACK';

/**
 * What a person writes. While an agent replies, "Send" (and Enter) queues the message after the
 * reply, "Stop and send" interrupts the reply (its text so far stays, marked interrupted) and the
 * ▾ menu's "Discard the reply and send" rolls it back; otherwise "Send" alone. Each button says
 * what it wants, whatever the session's default: the person chose it.
 */
function Composer({ replying, send }: { replying: boolean; send: (content: string, how: WhileReplying) => Promise<boolean> }) {
  const [text, setText] = useState('');
  const [menu, setMenu] = useState(false);
  useEffect(() => {
    if (!replying) setMenu(false);
  }, [replying]);
  const submit = async (how: WhileReplying) => {
    const content = text;
    if (!content.trim()) return;
    setText('');
    setMenu(false);
    if (!(await send(content, how))) setText(content);
  };
  const empty = !text.trim();
  return (
    <form
      class="composer"
      onSubmit={(e) => {
        e.preventDefault();
        void submit('ENQUEUE');
      }}
    >
      <textarea
        name="message"
        rows={2}
        placeholder="Say something…"
        value={text}
        onInput={(e) => setText(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && !e.shiftKey) {
            e.preventDefault();
            e.currentTarget.form?.requestSubmit();
          }
        }}
      />
      <div class="send-buttons">
        <button type="submit" name="send" disabled={empty} title={replying ? 'Answered after the reply being written' : undefined}>
          Send
        </button>
        {replying && (
          <>
            <button
              type="button"
              name="interrupt"
              disabled={empty}
              title="Stops the reply being written (its text so far stays) and answers this instead"
              onClick={() => submit('INTERRUPT')}
            >
              Stop and send
            </button>
            <button
              type="button"
              name="more"
              class="more"
              aria-haspopup="menu"
              aria-expanded={menu}
              aria-label="More ways to send"
              disabled={empty}
              onClick={() => setMenu(!menu)}
            >
              ▾
            </button>
            {menu && (
              <div class="send-menu" role="menu">
                <button type="button" role="menuitem" name="rollback" onClick={() => submit('ROLLBACK')}>
                  Discard the reply and send
                </button>
              </div>
            )}
          </>
        )}
      </div>
      {replying && (
        <p class="muted composer-hint">An agent is replying: Send queues your message after the reply; Stop and send interrupts it.</p>
      )}
    </form>
  );
}

export function SessionView({
  apiKey,
  client,
  sessionId,
  agents,
  onProblem,
}: {
  apiKey: string;
  client: Client;
  sessionId: string;
  agents: Agent[];
  onProblem: (p: Problem | null) => void;
}) {
  const [state, setState] = useState<SessionState | null>(null);
  const [title, setTitle] = useState('');
  const [sessionAgents, setSessionAgents] = useState<{ id: string; name: string }[]>([]);
  const [shareId, setShareId] = useState<string | null>(null);
  const [generation, setGeneration] = useState(0);
  const names = useRef(new Map<string, string>());
  for (const a of [...agents, ...sessionAgents]) names.current.set(a.id, a.name);

  useEffect(() => {
    let stopped = false;
    let unsubscribe = () => {};
    (async () => {
      try {
        const data = await request<{
          session: { title: string | null; agents: { id: string; name: string }[]; messages: { edges: { node: Message }[] } };
        }>(apiKey, SESSION, { id: sessionId });
        if (stopped) return;
        setTitle(data.session.title ?? '');
        setSessionAgents(data.session.agents);
        // This tab's own copy (kept across a reload) is exact up to its seq; otherwise the
        // messages as saved, and live events from now on.
        let current = saved(sessionId) ?? fromMessages(data.session.messages.edges.map((e) => e.node));
        if (current.seq !== null && current.order.length === 0)
          current = { ...fromMessages(data.session.messages.edges.map((e) => e.node)), seq: current.seq };
        setState(current);
        // graphql-ws sends these variables again on every reconnection: keeping `after` at the
        // last event shown makes a reconnection resume where the page was.
        const variables: { sessionId: string; after?: number } = { sessionId };
        if (current.seq !== null) variables.after = current.seq;
        unsubscribe = client.subscribe<{ sessionEvents: SessionEvent }>(
          { query: EVENTS, variables },
          {
            next: (result) => {
              const event = result.data?.sessionEvents;
              if (!event) return;
              current = applyEvent(current, event, (id) => names.current.get(id) ?? 'agent');
              variables.after = event.seq;
              save(sessionId, current);
              setState(current);
            },
            error: (errors) => {
              const list = Array.isArray(errors) ? errors : [];
              const code = (list[0] as { extensions?: { code?: string } } | undefined)?.extensions?.code;
              if (code === 'EVENTS_EXPIRED') {
                forget(sessionId);
                setGeneration((g) => g + 1);
              } else if (list.length) onProblem(describeProblem(list as never));
              else onProblem({ kind: 'connection', message: 'The live connection failed; reload the page to try again.' });
            },
            complete: () => {},
          },
        );
      } catch (e) {
        onProblem(problemOf(e));
      }
    })();
    return () => {
      stopped = true;
      unsubscribe();
    };
  }, [apiKey, client, sessionId, generation]);

  if (!state) return <p class="muted">Loading the session…</p>;
  const messages = state.order.map((id) => state.messages[id]!).filter(Boolean);
  const streaming = messages.some((m) => m.status === 'STREAMING');
  const queued = waitingReplies(messages);
  const act = async (query: string, variables: Record<string, unknown>) => {
    try {
      onProblem(null);
      return await request<Record<string, unknown>>(apiKey, query, variables);
    } catch (e) {
      onProblem(problemOf(e));
      return null;
    }
  };

  return (
    <section class="session" data-session-id={sessionId}>
      <header class="session-header">
        <h2>{title || sessionAgents.map((a) => a.name).join(', ') || 'Session'}</h2>
        <div class="actions">
          {streaming && (
            <button type="button" name="cancel" onClick={() => act(CANCEL, { sessionId })}>
              Stop replying
            </button>
          )}
          <button
            type="button"
            name="share"
            onClick={async () => {
              const data = (await act(SHARE, { id: sessionId })) as { shareSession: { shareId: string } } | null;
              if (data) setShareId(data.shareSession.shareId);
            }}
          >
            Share
          </button>
          {shareId && (
            <a class="share-link" href={`#/share/${encodeURIComponent(shareId)}`} target="_blank" rel="noopener">
              public page
            </a>
          )}
        </div>
      </header>
      <div class="messages">
        {messages.map((m) => (
          <MessageView
            key={m.id}
            message={m}
            waiting={queued.has(m.id)}
            onReact={(reaction) => act(REACT, { messageId: m.id, reaction })}
            onSettle={async (callId, approve, reason) => {
              const input = { sessionId, callId, approve, ...(reason ? { reason } : {}) };
              const data = (await act(SETTLE_APPROVAL, { input })) as { settleToolApproval: ToolCall } | null;
              // Shown settled at once; the reply's events then carry it on.
              if (data)
                setState((s) =>
                  s?.messages[m.id]
                    ? {
                        ...s,
                        messages: {
                          ...s.messages,
                          [m.id]: { ...s.messages[m.id]!, toolCalls: withCall(s.messages[m.id]!.toolCalls, data.settleToolApproval) },
                        },
                      }
                    : s,
                );
            }}
          />
        ))}
      </div>
      <Composer
        replying={streaming}
        send={async (content, how) => Boolean(await act(SEND, { input: { sessionId, content, whileReplying: how } }))}
      />
    </section>
  );
}
