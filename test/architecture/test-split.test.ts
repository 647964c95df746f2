import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * How the suite is split (docs/build.md, "How the tests are split"): rules are tested over
 * in-memory stores, and the app or a process is started only for what needs it (transport
 * contracts, faults, several instances). Starting the app costs a database and a migration per
 * file; a rule checked there is checked slowly and from afar.
 */

const root = fileURLToPath(new URL('../..', import.meta.url));
const testDir = join(root, 'test');

/**
 * At most this share of test files may start the app or a process: issue 50's aim. It was 0.75
 * (137 of 183) when first measured; the store checks now run over a database with no app
 * (test/helpers/domain-database.ts), and a domain's transport files that could share one app are
 * one file that starts it once (docs/build.md, "How the tests are split").
 */
const MAX_BOOTING_SHARE = 0.6;

/**
 * Each domain service and the module its rules live in (under src/domain/): its rules test is
 * `test/rules/<service>.test.ts`, which starts nothing and imports that module.
 */
const services: Record<string, string> = {
  tasks: 'tasks/service.ts',
  agents: 'agents/service.ts',
  models: 'models/service.ts',
  creations: 'creations/service.ts',
  search: 'search/service.ts',
  collections: 'collections/service.ts',
  concepts: 'concepts/service.ts',
  triggers: 'triggers/service.ts',
  sessions: 'sessions/service.ts',
  autonomy: 'autonomy/service.ts',
  access: 'access/service.ts',
  signals: 'signals/service.ts',
  deployments: 'deployments/service.ts',
  relay: 'deployments/relay.ts',
  webhooks: 'webhooks/service.ts',
  'mcp-servers': 'mcp-servers/service.ts',
};

/** Services whose rules are still tested only through the app: each moves up to `services` with its rules test. */
const awaiting: Record<string, string> = {};

/** Calls that start the app (in this process or as one) or another process. */
const starters = [
  'setUp',
  'setUpNow',
  'startTestApp',
  'buildApp',
  'startServerProcess',
  'startWithNpm',
  'startCliProcess',
  'runCli',
  'runCliProcess',
  'spawn',
  'spawnSync',
  'execFile',
  'execFileSync',
  'fork',
  'startRedisServer',
  'startPostgresCluster',
];

function filesUnder(dir: string, ending: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return filesUnder(path, ending);
    return entry.name.endsWith(ending) ? [path] : [];
  });
}

const calls = (names: Iterable<string>) => new RegExp(`\\b(?:${[...names].join('|')})\\(`);

/** The starters, with the helpers' exported functions that call one (`startPair` calling `setUp`, say). */
function allStarters(): string[] {
  const direct = calls(starters);
  const wrappers = filesUnder(join(testDir, 'helpers'), '.ts').flatMap((path) =>
    readFileSync(path, 'utf8')
      .split(/\n(?=(?:export\s+)?(?:async\s+)?(?:function|const|class|interface|type)\b)/)
      .flatMap((part) => {
        const name = /^export (?:async )?function (\w+)/.exec(part)?.[1];
        return name && direct.test(part) ? [name] : [];
      }),
  );
  return [...new Set([...starters, ...wrappers])];
}

const testFiles = filesUnder(testDir, '.test.ts').map((path) => ({
  path: relative(root, path),
  text: readFileSync(path, 'utf8'),
}));
const starts = calls(allStarters());
const booting = testFiles.filter((f) => starts.test(f.text));

/** The src/ modules a file imports for their values (`import type` brings nothing in). */
const valueImports = (path: string, text: string) =>
  [...text.matchAll(/^import\s+(?!type\s)[^;]*?from\s+'(\.{1,2}\/[^']+)'/gms)].map((m) =>
    relative(join(root, 'src/domain'), resolve(dirname(join(root, path)), m[1]!)),
  );

describe('the split of the suite', () => {
  it(`starts the app or a process in at most ${Math.round(MAX_BOOTING_SHARE * 100)} % of the test files`, () => {
    const share = booting.length / testFiles.length;
    console.info(
      `${booting.length} of ${testFiles.length} test files start the app or a process (${(share * 100).toFixed(1)} %); ` +
        `${testFiles.length - booting.length} start nothing`,
    );
    expect(share).toBeLessThanOrEqual(MAX_BOOTING_SHARE);
  });

  it('has a rules test over in-memory stores for every domain service', () => {
    const missing = Object.entries(services).flatMap(([service, module]) => {
      const file = testFiles.find((f) => f.path === `test/rules/${service}.test.ts`);
      if (!file) return [`${service}: no test/rules/${service}.test.ts`];
      if (starts.test(file.text)) return [`${service}: ${file.path} starts the app or a process`];
      if (!valueImports(file.path, file.text).includes(module)) return [`${service}: ${file.path} does not import src/domain/${module}`];
      return [];
    });
    console.info(`rules tests: ${Object.keys(services).length - missing.length} of ${Object.keys(services).length} services`);
    expect(missing).toEqual([]);
  });

  it('lists as awaiting only services with no rules test yet', () => {
    const written = Object.keys(awaiting).filter((service) => testFiles.some((f) => f.path === `test/rules/${service}.test.ts`));
    console.info(`awaiting a rules test: ${Object.keys(awaiting).join(', ')}`);
    expect(written).toEqual([]);
  });

  it('knows a booting file from one that starts nothing', () => {
    // The measure itself: this file starts nothing, and the files that start the app are counted.
    expect(booting.map((f) => f.path)).not.toContain('test/architecture/test-split.test.ts');
    expect(booting.map((f) => f.path)).toContain('test/graphql/protocol.test.ts');
    expect(booting.length).toBeGreaterThan(0);
  });
});
