import type { Client } from 'graphql-ws';
import { useEffect, useState } from 'preact/hooks';
import { type Problem, problemOf, request } from './api.ts';

const AUTONOMY = `query Autonomy($id: ID!) { session(id: $id) {
  budget { turns tokens manna } spent { turns }
  autonomySettings { autoReply replyInterval actorSelectionMethod }
} }`;

const SET_AUTONOMY = `mutation SetAutonomy($id: ID!, $input: UpdateSessionInput!) { updateSession(id: $id, input: $input) {
  budget { turns tokens manna } spent { turns }
  autonomySettings { autoReply replyInterval actorSelectionMethod }
} }`;

const STOPS = `subscription AutonomyStops($sessionId: ID!) { sessionEvents(sessionId: $sessionId) {
  __typename ... on AutonomyStopped { reason detail }
} }`;

interface Autonomy {
  budget: { turns: number | null; tokens: number | null; manna: number | null };
  spent: { turns: number };
  autonomySettings: { autoReply: boolean; replyInterval: number; actorSelectionMethod: 'RANDOM' | 'RANDOM_EXCLUDE_LAST' } | null;
}

/**
 * The switch that lets a session's agents take turns on their own: how long they wait after each
 * reply, who speaks next, and, for a session with no budget, how many more turns they may take
 * (the service refuses auto-reply without a budget, and its turn budget counts the turns already
 * taken, the opening replies among them: the page asks for more turns and adds those). It says
 * why the loop stopped when it does.
 */
export function AutonomySwitch({
  apiKey,
  client,
  sessionId,
  onProblem,
}: {
  apiKey: string;
  client: Client;
  sessionId: string;
  onProblem: (p: Problem | null) => void;
}) {
  const [autonomy, setAutonomy] = useState<Autonomy | null>(null);
  const [replyInterval, setReplyInterval] = useState(5);
  const [method, setMethod] = useState<'RANDOM' | 'RANDOM_EXCLUDE_LAST'>('RANDOM_EXCLUDE_LAST');
  const [moreTurns, setMoreTurns] = useState(10);
  const [stopped, setStopped] = useState<{ reason: string; detail: string } | null>(null);

  const show = (a: Autonomy) => {
    setAutonomy(a);
    if (a.autonomySettings) {
      setReplyInterval(a.autonomySettings.replyInterval);
      setMethod(a.autonomySettings.actorSelectionMethod);
    }
  };

  useEffect(() => {
    let live = true;
    request<{ session: Autonomy }>(apiKey, AUTONOMY, { id: sessionId })
      .then((data) => live && show(data.session))
      .catch((e) => onProblem(problemOf(e)));
    // A stop comes as an event: the switch turns off and says why.
    const unsubscribe = client.subscribe<{ sessionEvents: { __typename: string; reason?: string; detail?: string } }>(
      { query: STOPS, variables: { sessionId } },
      {
        next: (result) => {
          const event = result.data?.sessionEvents;
          if (event?.__typename !== 'AutonomyStopped') return;
          setStopped({ reason: event.reason!, detail: event.detail! });
          void request<{ session: Autonomy }>(apiKey, AUTONOMY, { id: sessionId }).then((data) => live && show(data.session));
        },
        error: () => {},
        complete: () => {},
      },
    );
    return () => {
      live = false;
      unsubscribe();
    };
  }, [apiKey, client, sessionId]);

  if (!autonomy) return null;
  const on = autonomy.autonomySettings?.autoReply ?? false;
  const budgeted = autonomy.budget.turns !== null || autonomy.budget.tokens !== null || autonomy.budget.manna !== null;

  const toggle = async (autoReply: boolean) => {
    onProblem(null);
    if (autoReply) setStopped(null);
    try {
      const input = {
        autonomySettings: { autoReply, replyInterval, actorSelectionMethod: method },
        ...(autoReply && !budgeted ? { budget: { turnBudget: autonomy.spent.turns + moreTurns } } : {}),
      };
      const data = await request<{ updateSession: Autonomy }>(apiKey, SET_AUTONOMY, { id: sessionId, input });
      show(data.updateSession);
    } catch (e) {
      onProblem(problemOf(e));
    }
  };

  return (
    <fieldset class="autonomy" data-autonomy={on ? 'on' : 'off'}>
      <legend>Autonomy</legend>
      <label>
        <input type="checkbox" name="auto-reply" checked={on} onChange={(e) => toggle(e.currentTarget.checked)} /> Agents reply on their own
      </label>
      <label>
        wait{' '}
        <input
          type="number"
          name="reply-interval"
          min={0}
          max={3600}
          value={replyInterval}
          disabled={on}
          onInput={(e) => setReplyInterval(Number(e.currentTarget.value))}
        />{' '}
        s after each reply
      </label>
      <label>
        next speaker{' '}
        <select
          name="actor-selection"
          value={method}
          disabled={on}
          onChange={(e) => setMethod(e.currentTarget.value as 'RANDOM' | 'RANDOM_EXCLUDE_LAST')}
        >
          <option value="RANDOM_EXCLUDE_LAST">anyone but the last</option>
          <option value="RANDOM">anyone</option>
        </select>
      </label>
      {!budgeted && (
        <label>
          stop after{' '}
          <input
            type="number"
            name="more-turns"
            min={1}
            max={1000}
            value={moreTurns}
            onInput={(e) => setMoreTurns(Number(e.currentTarget.value))}
          />{' '}
          more turns
        </label>
      )}
      <span class="muted" data-turns={autonomy.spent.turns}>
        {autonomy.spent.turns}
        {autonomy.budget.turns !== null ? ` of ${autonomy.budget.turns}` : ''} turns taken, the opening replies included
      </span>
      {stopped && (
        <p class="muted" data-stop-reason={stopped.reason}>
          Stopped: {stopped.detail}
        </p>
      )}
    </fieldset>
  );
}
