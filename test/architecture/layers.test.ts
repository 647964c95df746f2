import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const src = fileURLToPath(new URL('../../src', import.meta.url));

/**
 * Every relative import of every source file, as `from → to` paths relative to src/; and every
 * import of Prisma's own packages (`@prisma/client/runtime/client`, say), as the package's name.
 */
function imports(): { from: string; to: string }[] {
  const found: { from: string; to: string }[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== 'generated') walk(path);
      } else if (/\.(ts|js)$/.test(entry.name)) {
        for (const m of readFileSync(path, 'utf8').matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
          found.push({ from: relative(src, path), to: relative(src, resolve(dirname(path), m[1]!)) });
        }
        for (const m of readFileSync(path, 'utf8').matchAll(/(?:from|import)\s*\(?\s*'(@prisma\/[^']+)'/g)) {
          found.push({ from: relative(src, path), to: m[1]! });
        }
      }
    }
  };
  walk(src);
  return found;
}

const folder = (path: string) => path.split('/')[0]!;

/** The folders above the adapters: transports, plumbing, commands. */
const above = ['rest', 'graphql', 'mcp', 'http', 'realtime', 'limits', 'redis', 'cli', 'control', 'demo'];
/** Adapters of the domain's ports, side by side: none imports another, nor the database. */
const adapters = ['connectors', 'secrets', 'jobs', 'providers', 'executors', 'outbound'];
const adapterRules = (self: string) => [...above, 'db', ...adapters.filter((a) => a !== self)];

/** Which top-level folders of src/ each folder must not import: they lie outward of it (docs/decisions.md, "Layers"). */
const outward: Record<string, string[]> = {
  domain: [...above.filter((f) => f !== 'control'), ...adapters],
  providers: adapterRules('providers'),
  executors: adapterRules('executors'),
  connectors: adapterRules('connectors'),
  secrets: adapterRules('secrets'),
  outbound: adapterRules('outbound'),
  jobs: ['graphql', 'rest', 'mcp', 'http', 'realtime', 'limits', 'redis', 'cli', 'control', 'demo', 'providers', 'executors'],
  realtime: ['graphql', 'rest', 'mcp', 'http', 'cli', 'jobs'],
  limits: ['graphql', 'rest', 'mcp', 'http', 'realtime', 'cli'],
  db: ['domain', 'graphql', 'rest', 'mcp', 'http', 'realtime', 'limits', 'cli', 'jobs', 'providers', 'executors'],
  rest: ['graphql', 'mcp', 'cli'],
  graphql: ['rest', 'mcp', 'cli'],
  mcp: ['rest', 'graphql', 'cli'],
  http: ['rest', 'graphql', 'mcp', 'cli'],
  control: ['rest', 'graphql', 'mcp', 'http', 'realtime', 'cli'],
};

/** The folder of src/domain/ a path lies in (`core`, `sessions`, ...), or null for the composition at its root. */
const domainFolder = (path: string) => {
  const parts = path.split('/');
  return parts[0] === 'domain' && parts.length > 2 ? parts[1]! : null;
};

/**
 * What stands between clients (or an operator) and the domain, and the composition roots that
 * start it: each takes a domain folder through its front.
 */
const throughFronts = ['rest', 'graphql', 'mcp', 'http', 'cli', 'control', 'demo', 'app.ts', 'server.ts'];

/**
 * Whether a transport may import this file of src/domain/: a folder's front (its index.ts),
 * the shared vocabulary of core/, or the composition (services.ts).
 */
const openToTransports = (to: string) => {
  const inner = domainFolder(to);
  return inner === null || inner === 'core' || to === `domain/${inner}/index.ts`;
};

/**
 * What a front holds other than `export … from './file.ts'` lines, as `line: text`: a front is
 * the folder's door, naming what the folder offers, and the rules stay in the files behind it.
 */
function besidesReexports(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(join(src, file), 'utf8'), ts.ScriptTarget.Latest, true);
  return source.statements
    .filter((s) => !(ts.isExportDeclaration(s) && s.moduleSpecifier))
    .map((s) => `${source.getLineAndCharacterOfPosition(s.getStart(source)).line + 1}: ${s.getText(source).split('\n')[0]}`);
}

/** Folders of src/domain/ from which `start` is reached again by following imports, as a path. */
function cycleThrough(edges: Map<string, Set<string>>, start: string): string[] | null {
  const seen = new Set<string>();
  const walk = (at: string, path: string[]): string[] | null => {
    for (const next of edges.get(at) ?? []) {
      if (next === start) return [...path, next];
      if (seen.has(next)) continue;
      seen.add(next);
      const found = walk(next, [...path, next]);
      if (found) return found;
    }
    return null;
  };
  return walk(start, [start]);
}

/**
 * Where the database may be reached from inside src/domain/: each service's store, and the
 * composition that hands the database to them. Prisma's generated enums and its `Decimal` are
 * the database's words: the rules speak the domain's own (core/vocabulary.ts, core/manna.ts),
 * and the stores map between the two.
 */
const mayReachDatabase = (path: string) => /^domain\/([^/]+\/(.+-)?store\.ts|[^/]+\/stores?\/.+|services\.ts)$/.test(path);
const isDatabase = (to: string) => folder(to) === 'db' || to.startsWith('generated/') || to.startsWith('@prisma/');

/**
 * What each file of src/domain/ outside the stores (and the composition) takes from
 * core/stores/prisma-errors.ts, as `file: name`. A rule may tell a database fault (out of reach,
 * a row gone meanwhile) to wait or log; a write's conflict (a unique index) is the store's to
 * answer, as a typed result or a domain error of its own.
 */
function prismaErrorsTakenByRules(): string[] {
  return sourceFiles()
    .filter((file) => file.startsWith('domain/') && !mayReachDatabase(file))
    .flatMap((file) =>
      [...readFileSync(join(src, file), 'utf8').matchAll(/import\s+(?:type\s+)?\{([^}]*)\}\s+from\s+'([^']+)'/g)]
        .filter((m) => relative(src, resolve(dirname(join(src, file)), m[2]!)) === 'domain/core/stores/prisma-errors.ts')
        .flatMap((m) => m[1]!.split(',').map((name) => `${file}: ${name.replace(/^\s*type\s+/, '').trim()}`)),
    )
    .filter((taken) => !taken.endsWith(': '));
}
/** The database faults a rule may tell apart (see prismaErrorsTakenByRules). */
const faultsARuleMayTell = new Set(['isDatabaseUnavailable', 'isRecordGone']);

describe('layers', () => {
  const all = imports();

  it('reads the imports of the whole tree', () => {
    expect(all.length).toBeGreaterThan(200);
    expect(all).toContainEqual({ from: 'app.ts', to: 'domain/services.ts' });
  });

  for (const [layer, forbidden] of Object.entries(outward)) {
    it(`src/${layer}/ imports nothing from ${forbidden.map((f) => `src/${f}/`).join(', ')}`, () => {
      const wrong = all.filter((i) => folder(i.from) === layer && forbidden.includes(folder(i.to)));
      expect(wrong.map((i) => `${i.from} → ${i.to}`)).toEqual([]);
    });
  }

  it('only the composition roots (app.ts, server.ts, cli/) import src/providers/ and src/executors/: choosing an adapter is theirs', () => {
    const pickers = all.filter((i) => ['providers', 'executors'].includes(folder(i.to)) && folder(i.from) !== folder(i.to));
    expect(pickers).toContainEqual({ from: 'app.ts', to: 'providers/index.ts' });
    const wrong = pickers.filter((i) => !['app.ts', 'server.ts', 'cli'].includes(folder(i.from)));
    expect(wrong.map((i) => `${i.from} → ${i.to}`)).toEqual([]);
  });

  it('src/domain/ folders import one way: none reaches itself again through the others', () => {
    const edges = new Map<string, Set<string>>();
    for (const { from, to } of all) {
      const [a, b] = [domainFolder(from), domainFolder(to)];
      if (a && b && a !== b) edges.set(a, (edges.get(a) ?? new Set()).add(b));
    }
    expect(edges.get('sessions')).toContain('core');
    const cycles = [...edges.keys()].map((f) => cycleThrough(edges, f)).filter(Boolean);
    expect(cycles.map((c) => c!.join(' → '))).toEqual([]);
  });

  it("a transport (or a composition root) imports from src/domain/ only a folder's front (its index.ts), core/ and the composition (services.ts)", () => {
    const reaching = all.filter((i) => throughFronts.includes(folder(i.from)) && folder(i.to) === 'domain');
    expect(reaching.map((i) => i.from)).toContain('rest/agents.ts');
    const wrong = reaching.filter((i) => !openToTransports(i.to));
    expect(wrong.map((i) => `${i.from} → ${i.to}`)).toEqual([]);
  });

  it('every folder of src/domain/ but core/ has a front, and a front only re-exports what lies behind it', () => {
    const folders = readdirSync(join(src, 'domain'), { withFileTypes: true }).filter((e) => e.isDirectory());
    expect(folders.map((e) => e.name)).toContain('agents');
    const without = folders.filter((e) => e.name !== 'core' && !sourceFiles().includes(`domain/${e.name}/index.ts`));
    expect(without.map((e) => `domain/${e.name}/`)).toEqual([]);
    const fronts = sourceFiles().filter((file) => /^domain\/[^/]+\/index\.ts$/.test(file));
    expect(fronts.flatMap((front) => besidesReexports(front).map((found) => `${front}:${found}`))).toEqual([]);
  });

  it("only stores (and the composition of services) in src/domain/ import the database, the generated Prisma client (its enums too) or Prisma's packages", () => {
    const reaching = [...new Set(all.filter((i) => folder(i.from) === 'domain' && isDatabase(i.to)).map((i) => i.from))];
    expect(reaching).toContain('domain/services.ts');
    const wrong = reaching.filter((f) => !mayReachDatabase(f));
    expect(wrong).toEqual([]);
  });

  it("no rule in src/domain/ catches a write's conflict from Prisma: the stores answer it as a typed result", () => {
    const taken = prismaErrorsTakenByRules();
    expect(taken).toContain('domain/replies/endings.ts: isDatabaseUnavailable');
    expect(taken.filter((t) => !faultsARuleMayTell.has(t.slice(t.indexOf(': ') + 2)))).toEqual([]);
  });
});

/** Every source file under src/ (generated code left out), as paths relative to src/. */
function sourceFiles(dir = src): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'generated' ? [] : sourceFiles(path);
    return /\.(ts|js)$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [relative(src, path)] : [];
  });
}

/** Every function with a body (nested ones too) longer than `most` lines, as `file:line (n lines)`. */
function longFunctions(most: number): string[] {
  const found: string[] = [];
  for (const file of sourceFiles()) {
    const source = ts.createSourceFile(file, readFileSync(join(src, file), 'utf8'), ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node) => {
      if (ts.isFunctionLike(node) && 'body' in node && node.body) {
        const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
        const last = source.getLineAndCharacterOfPosition(node.body.getEnd()).line + 1;
        if (last - first + 1 > most) found.push(`${file}:${first} (${last - first + 1} lines)`);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

/**
 * What opens connections: Node's own network modules, and the clients among our dependencies
 * (HTTP, WebSocket, Redis, PostgreSQL), by the name an import gives, with or without `node:` and
 * with any subpath (`dns/promises`, `ws/wrapper`).
 */
const networkModule =
  /^(node:)?(http|https|http2|net|tls|dgram|dns)(\/.*)?$|^(undici|ws|ioredis|pg|pg-boss|@prisma\/adapter-pg|graphql-ws)(\/.*)?$/;
/** The global constructors that open a connection to another host (beside the global `fetch`). */
const socketConstructors = new Set(['WebSocket', 'EventSource']);

/**
 * The network clients in one file's text, as `line: what`: an import (type-only too: a port that
 * speaks Node's HTTP types is the adapter's shape, not the domain's), an `export ... from`, a
 * dynamic `import()` or `require()` of a network module; a call of the global `fetch` (or
 * `globalThis.fetch`); `new WebSocket` or `new EventSource`. Read from the syntax tree, so a
 * word in a comment or a string, or a method of our own called `fetch`, is not one.
 */
function networkClients(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const at = (node: ts.Node, what: string) =>
    found.push(`${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}: ${what}`);
  const specifier = (node: ts.Expression | undefined) => (node && ts.isStringLiteralLike(node) ? node.text : null);
  const global = (node: ts.Expression) =>
    ts.isIdentifier(node)
      ? node.text
      : ts.isPropertyAccessExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'globalThis'
        ? node.name.text
        : null;
  const visit = (node: ts.Node) => {
    let module: string | null = null;
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) module = specifier(node.moduleSpecifier);
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference))
      module = specifier(node.moduleReference.expression);
    else if (ts.isCallExpression(node)) {
      const callee = node.expression;
      if (callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === 'require'))
        module = specifier(node.arguments[0]);
      else if (global(callee) === 'fetch') at(node, 'fetch()');
    } else if (ts.isNewExpression(node)) {
      const name = global(node.expression);
      if (name && socketConstructors.has(name)) at(node, `new ${name}()`);
    }
    if (module && networkModule.test(module)) at(node, `'${module}'`);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The network clients of every source file under `folder` of src/, as `file:line: what`. */
const networkClientsUnder = (folder: string) =>
  sourceFiles()
    .filter((file) => file.startsWith(`${folder}/`))
    .flatMap((file) => networkClients(file, readFileSync(join(src, file), 'utf8')).map((found) => `${file}:${found}`));

describe('network clients', () => {
  // The domain decides; reaching another host is an adapter's work, behind a port the domain
  // declares (docs/decisions.md, "Layers"): the chat model's, the embeddings', a tool service's.
  it('none lives in src/domain/: the model, embeddings and tool-service clients are adapters outside it', () => {
    expect(networkClientsUnder('domain')).toEqual([]);
  });

  it('the adapters outside it are found by the same reading', () => {
    const adapters = [...networkClientsUnder('providers'), ...networkClientsUnder('outbound'), ...networkClientsUnder('connectors')];
    expect(adapters).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^providers\/chat\/openai\/http\.ts:\d+: 'node:https'$/),
        expect.stringMatching(/^providers\/embeddings\/openai-http\.ts:\d+: fetch\(\)$/),
        // Webhooks and tool services: calls to addresses the service is given, through the one guard.
        expect.stringMatching(/^outbound\/address-guard\.ts:\d+: 'node:https'$/),
        expect.stringMatching(/^outbound\/webhook-sender\.ts:\d+: 'node:https'$/),
        expect.stringMatching(/^connectors\/telegram\/.+: fetch\(\)$/),
      ]),
    );
    // The tool services' client calls only through the guard's fetch, handed to it.
    expect(networkClientsUnder('executors')).toEqual([]);
  });

  it('are told from what only looks like one', () => {
    const text = [
      "import type { IncomingMessage } from 'node:http';",
      "import { lookup } from 'dns/promises';",
      "export { WebSocketServer } from 'ws';",
      "const pg = await import('pg');",
      'await fetch(url);',
      'await globalThis.fetch(url);',
      'new WebSocket(url);',
      "import { z } from 'zod';",
      "import { request } from './http.ts';",
      '// fetch(url) in a comment',
      "const words = 'fetch(url)';",
      'await store.fetch(url);',
      "import { createHash } from 'node:crypto';",
    ].join('\n');
    expect(networkClients('example.ts', text)).toEqual([
      "1: 'node:http'",
      "2: 'dns/promises'",
      "3: 'ws'",
      "4: 'pg'",
      '5: fetch()',
      '6: fetch()',
      '7: new WebSocket()',
    ]);
  });
});

describe('size', () => {
  // A reader holds a function in one screen; a service that grows past that is split into named
  // parts (docs/decisions.md, "Layers"), not left to grow with each feature.
  it('no function in src/ is longer than 150 lines', () => {
    expect(sourceFiles()).toContain('domain/services.ts');
    expect(longFunctions(150)).toEqual([]);
  });
});
