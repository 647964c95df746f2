import { useEffect, useState } from 'preact/hooks';
import { type Problem, problemOf, request } from './api.ts';
import { SHARED } from './operations.ts';

interface Share {
  shareId: string;
  title: string;
  createdAt: string;
  owner: { username: string };
  agents: { key: string; name: string }[];
  messages: { id: string; role: string; content: string; sender: { username: string } | null }[];
}

/** A shared session, as anyone with its link reads it: no key needed. */
export function SharePage({ shareId }: { shareId: string }) {
  const [share, setShare] = useState<Share | null>(null);
  const [problem, setProblem] = useState<Problem | null>(null);
  useEffect(() => {
    request<{ share: Share }>('', SHARED, { shareId }).then(
      (data) => setShare(data.share),
      (e) => setProblem(problemOf(e)),
    );
  }, [shareId]);
  if (problem) return <div class="problem">{problem.message}</div>;
  if (!share) return <p class="muted">Loading…</p>;
  return (
    <div class="app share-page">
      <header>
        <h1>{share.title || 'Shared session'}</h1>
        <p class="muted">
          shared by {share.owner.username} · with {share.agents.map((a) => a.name).join(', ')} ·{' '}
          {new Date(share.createdAt).toLocaleString()}
        </p>
      </header>
      <div class="messages">
        {share.messages.map((m) => (
          <article key={m.id} class={`message ${m.role === 'USER' ? 'from-user' : 'from-agent'}`} data-role={m.role}>
            <header>
              <strong>{m.sender?.username ?? m.role.toLowerCase()}</strong>
            </header>
            <div class="content">{m.content}</div>
          </article>
        ))}
      </div>
      <p>
        <a href="#/">Open the playground</a>
      </p>
    </div>
  );
}
