// Compiles the TypeScript service to plain JavaScript in dist/ (tsc, file for file), copies the
// JavaScript and other files src/ loads at run time beside it, and leaves in dist/db/ a PGlite
// cluster with every migration applied, which new data directories start from. `npm install`
// runs it; bin/parley.js (and so `npm start`) calls ensureBuilt() first, which rebuilds only when
// the sources differ from what dist/ was built from.
//   node scripts/build.mjs              build now
//   node scripts/build.mjs --if-stale   build only if the sources changed
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFile, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = join(root, 'dist');
const infoFile = join(dist, 'build.json');
const snapshotDir = join(dist, 'db', 'pgdata-snapshot');
const playgroundDir = join(dist, 'playground');
const lockFile = join(root, '.build.lock');

const files = async (dir) =>
  (await readdir(join(root, dir), { recursive: true, withFileTypes: true }))
    .filter((e) => e.isFile())
    .map((e) => relative(root, join(e.parentPath, e.name)));
const versionOf = (pkg) =>
  readFile(join(root, 'node_modules', pkg, 'package.json'), 'utf8').then(
    (text) => JSON.parse(text).version,
    () => 'missing',
  );

/** SHA-256 over the named files' paths and contents, and the named packages' versions. */
async function digest(paths, packages) {
  const hash = createHash('sha256');
  const contents = await Promise.all(paths.sort().map((p) => readFile(join(root, p))));
  paths.forEach((p, i) => hash.update(`${p}\0`).update(contents[i]).update('\0'));
  for (const pkg of packages) hash.update(`${pkg}@${await versionOf(pkg)}\0`);
  return hash.digest('hex');
}

/**
 * What a build is made from. Contents, not modification times: a checkout or a copy that keeps
 * times cannot fool it, and a file deleted from src/ changes it too. The snapshot has its own,
 * narrower one, so editing code does not rebuild the database.
 */
export async function fingerprints() {
  // The migrations and the code that opens the embedded database and applies them.
  const snapshotInputs = [...(await files('prisma/migrations')), ...(await files('src/db'))];
  return {
    code: await digest([...(await files('src')), 'tsconfig.json', 'tsconfig.build.json', 'scripts/build.mjs'], ['typescript']),
    snapshot: await digest(snapshotInputs, ['@electric-sql/pglite', '@prisma/schema-engine-wasm']),
    // The browser playground (Vite builds it into dist/playground/).
    playground: await digest(await files('playground'), ['vite', 'preact', 'graphql-ws']),
  };
}

/** What dist/ was built from (dist/build.json), or null when there is no complete build. */
export async function readBuildInfo() {
  return readFile(infoFile, 'utf8').then(JSON.parse, () => null);
}

function run(args) {
  return new Promise((resolve, reject) => {
    // tsc reports on stdout; here everything goes to stderr, which keeps a CLI command's output clean.
    const child = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout.pipe(process.stderr);
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${args.join(' ')} failed (exit code ${code}), see above`))));
  });
}

// Emit only (tsconfig.build.json has noCheck): types are `npm run typecheck`'s job, which `npm
// test` runs first. The sources compile file by file (isolatedModules), so the output is the
// same as a checked build's, in a few seconds instead of ten or more.
const tsc = () => run([join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json')]);
const exists = (path) =>
  stat(path).then(
    () => true,
    () => false,
  );
const compiled = (source) => join(dist, relative('src', source).replace(/\.ts$/, '.js'));

async function build(wanted) {
  const previous = await readBuildInfo();
  // Until the build completes, dist/ does not claim to be any build.
  await rm(infoFile, { force: true });
  const sources = await files('src');
  await tsc();
  // Files the code loads from beside itself (the PGlite worker, GraphiQL's start script).
  for (const asset of sources.filter((p) => !p.endsWith('.ts'))) {
    await mkdir(dirname(compiled(asset)), { recursive: true });
    await copyFile(join(root, asset), compiled(asset));
  }
  // Output of sources that no longer exist.
  const kept = new Set(sources.map(compiled));
  for (const output of await files('dist')) {
    const path = join(root, output);
    if (path === infoFile || path.startsWith(snapshotDir + '/') || path.startsWith(playgroundDir + '/') || kept.has(path)) continue;
    await rm(path);
  }
  if (previous?.snapshot !== wanted.snapshot || !(await exists(join(snapshotDir, 'PG_VERSION')))) {
    await run([fileURLToPath(import.meta.url), '--snapshot']);
  }
  if (previous?.playground !== wanted.playground || !(await exists(join(playgroundDir, 'index.html')))) {
    await run([join(root, 'node_modules/vite/bin/vite.js'), 'build', '--config', join(root, 'playground/vite.config.ts')]);
  }
  await writeFile(infoFile, `${JSON.stringify({ ...wanted, builtAt: new Date().toISOString() }, null, 2)}\n`);
}

/**
 * A new PGlite cluster migrated by the same code and schema engine as any start, so its
 * `_prisma_migrations` rows are the ones `prisma migrate deploy` writes (with the build's times).
 */
async function makeSnapshot() {
  const { openDatabase } = await import(pathToFileURL(join(dist, 'db/database.js')).href);
  const { applyMigrations } = await import(pathToFileURL(join(dist, 'db/migrate.js')).href);
  const { trimSnapshot } = await import(pathToFileURL(join(dist, 'db/snapshot.js')).href);
  const work = join(dist, `.snapshot-${process.pid}`);
  await rm(work, { recursive: true, force: true });
  const database = await openDatabase({ kind: 'pglite', dataDir: work }, { snapshot: false });
  try {
    await applyMigrations(database.migrationAdapterFactory);
    await trimSnapshot(database.migrationAdapterFactory);
  } finally {
    await database.close();
  }
  // Renames only, so a process copying the snapshot meanwhile fails rather than copies half of it.
  const old = join(dist, `.snapshot-old-${process.pid}`);
  await rename(snapshotDir, old).catch((e) => {
    if (e.code !== 'ENOENT') throw e;
  });
  await rename(join(work, 'pgdata'), snapshotDir);
  await rm(old, { recursive: true, force: true });
  await rm(work, { recursive: true, force: true });
}

const isRunning = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
};

/** One build at a time: processes that find the build stale together wait for the first. */
async function withLock(task) {
  let told = false;
  for (;;) {
    try {
      await writeFile(lockFile, String(process.pid), { flag: 'wx' });
      break;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
      const holder = Number(await readFile(lockFile, 'utf8').catch(() => '0'));
      if (holder && !isRunning(holder)) {
        await rm(lockFile, { force: true });
        continue;
      }
      if (!told) console.error(`parley: waiting for the build another process is running${holder ? ` (pid ${holder})` : ''}`);
      told = true;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    return await task();
  } finally {
    await rm(lockFile, { force: true });
  }
}

/** Builds dist/ unless it was built from exactly the current sources. */
export async function ensureBuilt() {
  const fresh = async () => {
    const wanted = await fingerprints();
    const built = await readBuildInfo();
    return {
      wanted,
      built,
      fresh: built?.code === wanted.code && built?.snapshot === wanted.snapshot && built?.playground === wanted.playground,
    };
  };
  if ((await fresh()).fresh) return;
  await withLock(async () => {
    const { wanted, built, fresh: builtMeanwhile } = await fresh();
    if (builtMeanwhile) return;
    console.error(
      `parley: building dist/ from the TypeScript sources (${built ? 'they changed since the last build' : 'there is no complete build'})`,
    );
    await build(wanted);
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    const mode = process.argv[2];
    if (mode === '--snapshot') await makeSnapshot();
    else if (mode === '--if-stale') await ensureBuilt();
    else await withLock(async () => build(await fingerprints()));
    // The schema engine leaves a timer behind after migrating.
    process.exit(0);
  } catch (e) {
    console.error(e instanceof Error ? e.message : e);
    process.exit(1);
  }
}
