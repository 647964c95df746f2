import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Counts held by other parts of the app, read when /metrics is scraped. */
export interface LiveCounts {
  /** Live-event subscriptions of every transport (REST SSE, GraphQL over graphql-ws or SSE). */
  eventSubscribers(): number;
  graphqlSockets(): number;
}

/** Seconds, from 5 ms to a minute: requests, and streams that stay open far longer. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

const MAX_OPERATION_NAMES = 200;

type Registers = Registry[];

const once = (f: () => void) => {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    f();
  };
};

/**
 * The service's Prometheus metrics, in a registry of their own (one per app, so tests can run
 * several apps in one process). Parts of the app get the piece they record into (`http`,
 * `graphql`, `replies`, `manna`, `streams`) rather than importing a global.
 * `process: true` adds Node's process metrics (memory, CPU, event loop lag, GC).
 */
export function createMetrics(options: { process?: boolean } = {}) {
  const registry = new Registry();
  const registers = [registry];
  if (options.process) collectDefaultMetrics({ register: registry });
  let live: LiveCounts | null = null;
  // Made in the order /metrics has always listed them.
  const http = httpMetrics(registers);
  const graphql = graphqlMetrics(registers);
  const streams = streamMetrics(registers);
  liveGauges(registers, () => live);
  const replies = replyMetrics(registers);
  const manna = mannaMetrics(registers);
  return {
    registry,

    /** The parts that hold live counts, once they exist. */
    watch(counts: LiveCounts) {
      live = counts;
    },

    http,
    graphql,
    streams,
    replies,
    manna,
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

function httpMetrics(registers: Registers) {
  const httpRequests = new Counter({
    name: 'parley_http_requests_total',
    help: 'HTTP requests answered, by route pattern, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers,
  });
  const httpDuration = new Histogram({
    name: 'parley_http_request_duration_seconds',
    help: 'Time from request to the end of the response (for event streams, how long the stream was open)',
    labelNames: ['route', 'method', 'status'] as const,
    buckets: DURATION_BUCKETS,
    registers,
  });
  return {
    observe(route: string, method: string, status: number, seconds: number) {
      const labels = { route, method, status: String(status) };
      httpRequests.inc(labels);
      httpDuration.observe(labels, seconds);
    },
  };
}

function graphqlMetrics(registers: Registers) {
  const graphqlOperations = new Counter({
    name: 'parley_graphql_operations_total',
    help: 'GraphQL operations executed or subscribed (HTTP and graphql-ws), by operation name and type; outcome error when the result has errors',
    labelNames: ['operation', 'type', 'outcome'] as const,
    registers,
  });
  const graphqlDuration = new Histogram({
    name: 'parley_graphql_operation_duration_seconds',
    help: 'Execution time of GraphQL queries and mutations',
    labelNames: ['operation', 'type'] as const,
    buckets: DURATION_BUCKETS,
    registers,
  });
  const graphqlSubscriptions = new Gauge({
    name: 'parley_graphql_subscriptions_open',
    help: 'GraphQL subscriptions running now (graphql-ws or SSE)',
    registers,
  });
  const operationNames = new Set<string>();
  return {
    /**
     * Operation names come from clients: past this many distinct ones they are counted as
     * `other`, so a client cannot grow the metrics without bound.
     */
    operationLabel(name: string | undefined) {
      if (!name) return 'anonymous';
      if (operationNames.has(name)) return name;
      if (operationNames.size >= MAX_OPERATION_NAMES || name.length > 64) return 'other';
      operationNames.add(name);
      return name;
    },
    executed(operation: string, type: string, failed: boolean, seconds: number) {
      graphqlOperations.inc({ operation, type, outcome: failed ? 'error' : 'ok' });
      graphqlDuration.observe({ operation, type }, seconds);
    },
    /** A subscription started; returns what to call when it ends. */
    subscribed(operation: string, failed: boolean): () => void {
      graphqlOperations.inc({ operation, type: 'subscription', outcome: failed ? 'error' : 'ok' });
      if (failed) return () => {};
      graphqlSubscriptions.inc();
      return once(() => graphqlSubscriptions.dec());
    },
  };
}

function streamMetrics(registers: Registers) {
  const sseStreams = new Gauge({ name: 'parley_sse_streams_open', help: 'REST event streams (text/event-stream) open now', registers });
  return {
    /** An SSE stream opened; returns what to call when it closes. */
    opened(): () => void {
      sseStreams.inc();
      return once(() => sseStreams.dec());
    },
  };
}

/** Gauges read from the parts that hold the counts, when /metrics is scraped. */
function liveGauges(registers: Registers, live: () => LiveCounts | null) {
  new Gauge({
    name: 'parley_event_subscribers',
    help: 'Subscriptions to live session events open now, all transports together',
    registers,
    collect() {
      const counts = live();
      if (counts) this.set(counts.eventSubscribers());
    },
  });
  new Gauge({
    name: 'parley_graphql_ws_sockets_open',
    help: 'graphql-ws WebSocket connections open now',
    registers,
    collect() {
      const counts = live();
      if (counts) this.set(counts.graphqlSockets());
    },
  });
}

function replyMetrics(registers: Registers) {
  const repliesStreaming = new Gauge({ name: 'parley_replies_streaming', help: 'Agent replies being written now', registers });
  // Counted per token into plain numbers, added to the counter when it is read (a scrape): an
  // increment of a labelled counter hashes its labels, once a token on every stream.
  const streamedBy = { content: 0, reasoning: 0 };
  const tokensStreamed: Counter<'kind'> = new Counter({
    name: 'parley_tokens_streamed_total',
    help: 'Pieces of reply text streamed to sessions (content, or reasoning shown to the user)',
    labelNames: ['kind'] as const,
    registers,
    collect() {
      for (const kind of ['content', 'reasoning'] as const) {
        if (streamedBy[kind] === 0) continue;
        tokensStreamed.inc({ kind }, streamedBy[kind]);
        streamedBy[kind] = 0;
      }
    },
  });
  const usageTokens = new Counter({
    name: 'parley_llm_tokens_total',
    help: 'Tokens counted on replies (as the provider reported them, or estimated)',
    labelNames: ['type'] as const,
    registers,
  });
  const providerErrors = new Counter({
    name: 'parley_provider_errors_total',
    help: 'Model provider calls that failed (after the provider retry), by kind',
    labelNames: ['kind'] as const,
    registers,
  });
  return {
    /** A reply started; returns what to call when it ends, however it ends. */
    started(): () => void {
      repliesStreaming.inc();
      return once(() => repliesStreaming.dec());
    },
    streamed(kind: 'content' | 'reasoning') {
      streamedBy[kind]++;
    },
    usage(promptTokens: number, completionTokens: number) {
      usageTokens.inc({ type: 'prompt' }, promptTokens);
      usageTokens.inc({ type: 'completion' }, completionTokens);
    },
    providerError(kind: string) {
      providerErrors.inc({ kind });
    },
  };
}

function mannaMetrics(registers: Registers) {
  const mannaCharged = new Counter({
    name: 'parley_manna_charged_total',
    help: 'Manna charged for tool calls that completed (refunded holds are not counted), by tool',
    labelNames: ['tool'] as const,
    registers,
  });
  return {
    charged(tool: string, amount: number) {
      if (amount > 0) mannaCharged.inc({ tool }, amount);
    },
  };
}
