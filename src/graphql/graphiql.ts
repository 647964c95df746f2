import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';

const require = createRequire(import.meta.url);
const bundleDir = dirname(require.resolve('@graphql-yoga/graphiql'));
const version = (JSON.parse(readFileSync(join(bundleDir, '..', 'package.json'), 'utf8')) as { version: string }).version;
const startDir = dirname(fileURLToPath(import.meta.url));

/**
 * What GraphiQL opens on: who you are, the agents you can talk to, and a reply streaming in.
 * The run button offers both operations by name.
 */
export const GRAPHIQL_DOCUMENT = `# Put your API key in Headers below: {"X-Api-Key": "pk_..."}
query Me {
  me { username balance }
  agents(first: 10) { edges { node { id name owner { username } } } }
}

# An agent id from Me's answer, then run Talk: the reply streams in.
subscription Talk {
  sendMessage(input: { agentIds: ["<agent id>"], content: "Hello!" }) {
    __typename
    ... on AssistantToken { text }
    ... on AssistantMessage { message { content } }
  }
}
`;

/** Where GraphiQL's files are served; the version in the path lets browsers cache them for good. */
export const GRAPHIQL_ASSETS = `/graphiql/${version}`;

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * The GraphiQL page. Its scripts and styles are the installed `@graphql-yoga/graphiql` bundle
 * served by this service (never a CDN), so it works offline and behind strict proxies.
 */
export function renderGraphiQL(options: { title?: string; defaultQuery?: string } & Record<string, unknown>): string {
  // The bundle opens on `query` (else its stock welcome text, which would call parley "an
  // in-browser tool"). `<` is escaped so no option value can close the script element it sits in.
  const { defaultQuery, ...rest } = options;
  const json = JSON.stringify({ ...rest, query: defaultQuery }).replace(/</g, '\\u003c');
  const title = escapeHtml(options.title ?? 'GraphiQL');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${title}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${GRAPHIQL_ASSETS}/graphiql.css">
</head>
<body id="body" class="no-focus-outline">
<noscript>GraphiQL needs JavaScript.</noscript>
<div id="root">Loading ${title}…</div>
<script type="application/json" id="graphiql-options">${json}</script>
<script src="${GRAPHIQL_ASSETS}/yoga-graphiql.umd.js"></script>
<script src="${GRAPHIQL_ASSETS}/start.js" data-assets="${GRAPHIQL_ASSETS}"></script>
</body>
</html>`;
}

/**
 * The Content-Security-Policy of the page (and of /graphql's other answers, which are data):
 * scripts, styles, fonts and Monaco's editor workers come from this origin only, GraphiQL
 * talks to this origin only (fetch and SSE). The options block is `application/json`, which
 * is not run, so no inline script is allowed; Monaco sets inline styles, so those are.
 */
export const GRAPHIQL_CSP = {
  defaultSrc: ["'none'"],
  scriptSrc: ["'self'"],
  styleSrc: ["'self'", "'unsafe-inline'"],
  imgSrc: ["'self'", 'data:'],
  fontSrc: ["'self'", 'data:'],
  connectSrc: ["'self'"],
  workerSrc: ["'self'"],
  baseUri: ["'none'"],
  formAction: ["'none'"],
  frameAncestors: ["'none'"],
};

const cacheForever = { immutable: true, maxAge: '365d' } as const;

/** Serves the bundle's files (and the start script) as long-cached static files, to anyone. */
export function graphiqlAssets(app: FastifyInstance) {
  app.get<{ Params: { '*': string } }>(`${GRAPHIQL_ASSETS}/*`, { config: { public: true } }, (request, reply) => {
    const file = request.params['*'];
    return file === 'start.js'
      ? reply.sendFile('graphiql-start.js', startDir, cacheForever)
      : reply.sendFile(file, bundleDir, cacheForever);
  });
}
