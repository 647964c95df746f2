import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const domain = join(root, 'src/domain');

/** The schema's models, each with its relation fields (field → the model it points to, and whether it is a list). */
function schemaModels(text: string): Map<string, Map<string, { model: string; list: boolean }>> {
  const models = new Map<string, Map<string, { model: string; list: boolean }>>();
  const bodies = [...text.matchAll(/^model (\w+) \{([\s\S]*?)^\}/gm)];
  const names = new Set(bodies.map((m) => m[1]!));
  for (const [, name, body] of bodies) {
    const relations = new Map<string, { model: string; list: boolean }>();
    for (const [, field, type, list] of body!.matchAll(/^\s+(\w+)\s+(\w+)(\[\])?\??\s/gm)) {
      if (names.has(type!)) relations.set(field!, { model: type!, list: list === '[]' });
    }
    models.set(name!, relations);
  }
  return models;
}

const schema = readFileSync(join(root, 'prisma/schema.prisma'), 'utf8');
const models = schemaModels(schema);
/** Every field of each model, columns and relations. */
const fields = new Map(
  [...schema.matchAll(/^model (\w+) \{([\s\S]*?)^\}/gm)].map(([, name, body]) => [
    name!,
    new Set([...body!.matchAll(/^\s+(\w+)\s/gm)].map((f) => f[1]!)),
  ]),
);
/** A model's delegate on a Prisma client or transaction: `tx.creationCollection` for CollectionCreation. */
const byDelegate = new Map([...models.keys()].map((m) => [m[0]!.toLowerCase() + m.slice(1), m]));

/** Calls on a model's delegate that change rows; reads (find*, count, aggregate, groupBy) are left out. */
const writeMethods = new Set([
  'create',
  'createMany',
  'createManyAndReturn',
  'update',
  'updateMany',
  'updateManyAndReturn',
  'upsert',
  'delete',
  'deleteMany',
]);
/** Keys of a nested write on a relation field: they write the related model's rows. */
const nestedWrites = new Set(['create', 'createMany', 'connectOrCreate', 'upsert', 'update', 'updateMany', 'delete', 'deleteMany']);
/** On a list relation the foreign key lies in the related rows, so these write them too. */
const listLinks = new Set(['set', 'connect', 'disconnect']);

/** SQL that changes rows of a quoted table (`FOR UPDATE`, `DO UPDATE SET` name no table, so they are not matched). */
const sqlWrite = /\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM|MERGE\s+INTO|TRUNCATE(?:\s+TABLE)?)\s+(?:ONLY\s+)?"(\w+)"/gi;

/** A write whose columns cannot be read (a delete, a spread, a computed name, data built elsewhere): the whole row. */
const ALL = '*';

/** The columns an UPDATE's SET assigns, read from the text after the table's name; ALL for any it cannot name. */
function setColumns(rest: string): string[] {
  const set = /^\s+(?:(?:AS\s+)?(?!SET\b)\w+\s+)?SET\s/i.exec(rest);
  if (!set) return [ALL];
  const pieces: string[] = [];
  let depth = 0;
  let start = set[0].length;
  for (let i = start; i <= rest.length; i++) {
    const c = rest[i];
    if (c === '(') depth++;
    else if (c === ')' && depth > 0) depth--;
    else if (
      depth === 0 &&
      (c === ',' || c === ')' || c === ';' || i === rest.length || /^\s(?:FROM|WHERE|RETURNING)\b/i.test(rest.slice(i)))
    ) {
      pieces.push(rest.slice(start, i));
      if (c !== ',') break;
      start = i + 1;
    }
  }
  return pieces.map((a) => /^\s*(?:\w+\.)?"?(\w+)"?\s*=/.exec(a)?.[1] ?? ALL);
}

/** The columns a write statement of SQL names: SET's assignments, INSERT's column list; ALL for the rest. */
function sqlColumns(verb: string, rest: string): string[] {
  if (/^UPDATE$/i.test(verb)) return setColumns(rest);
  const list = /^INSERT/i.test(verb) ? /^\s*\(([^)]*)\)/.exec(rest) : null;
  return list ? list[1]!.split(',').map((c) => c.trim().replace(/^"|"$/g, '')) : [ALL];
}

const propertyName = (p: ts.ObjectLiteralElementLike) =>
  p.name && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name)) ? p.name.text : undefined;
const objectsIn = (e: ts.Expression | undefined): ts.ObjectLiteralExpression[] =>
  !e ? [] : ts.isObjectLiteralExpression(e) ? [e] : ts.isArrayLiteralExpression(e) ? e.elements.flatMap(objectsIn) : [];
const property = (o: ts.ObjectLiteralExpression, name: string) =>
  o.properties.find((p): p is ts.PropertyAssignment => ts.isPropertyAssignment(p) && propertyName(p) === name)?.initializer;

/** Models written by the nested writes of `data`, an object of `model`'s fields (followed as far as they are literals). */
function nestedModels(model: string, data: ts.ObjectLiteralExpression, found: Set<string>) {
  for (const p of data.properties) {
    const relation = ts.isPropertyAssignment(p) ? models.get(model)?.get(propertyName(p) ?? '') : undefined;
    if (!relation || !ts.isPropertyAssignment(p)) continue;
    for (const op of objectsIn(p.initializer)) {
      for (const q of op.properties) {
        const key = ts.isPropertyAssignment(q) ? propertyName(q) : undefined;
        if (!key || !ts.isPropertyAssignment(q)) continue;
        if (nestedWrites.has(key) || (relation.list && listLinks.has(key))) found.add(relation.model);
        for (const inner of objectsIn(q.initializer)) {
          const fields = [inner, ...['data', 'create', 'update'].flatMap((k) => objectsIn(property(inner, k)))];
          for (const f of fields) nestedModels(relation.model, f, found);
        }
      }
    }
  }
}

/** The keys of a write's `data` (either branch of a condition, each row of a list); ALL where they cannot be read. */
function dataColumns(e: ts.Expression | undefined): string[] {
  if (!e) return [ALL];
  if (ts.isParenthesizedExpression(e)) return dataColumns(e.expression);
  if (ts.isConditionalExpression(e)) return [...dataColumns(e.whenTrue), ...dataColumns(e.whenFalse)];
  if (ts.isArrayLiteralExpression(e)) return e.elements.flatMap(dataColumns);
  if (!ts.isObjectLiteralExpression(e)) return [ALL];
  return e.properties.map((p) => ((ts.isPropertyAssignment(p) || ts.isShorthandPropertyAssignment(p)) && propertyName(p)) || ALL);
}

/** The columns one Prisma write call sets: a delete takes the whole row, an upsert what it creates and what it updates. */
function callColumns(method: string, args: ts.Expression | undefined): string[] {
  if (method.startsWith('delete') || !args || !ts.isObjectLiteralExpression(args)) return [ALL];
  if (method === 'upsert') return [...dataColumns(property(args, 'create')), ...dataColumns(property(args, 'update'))];
  return dataColumns(property(args, 'data'));
}

/**
 * The tables one source text writes, each with the columns it sets (ALL: the whole row, or
 * columns that cannot be read): Prisma write calls on any client or transaction, and SQL in
 * string literals. A nested write counts as a write of the related table's whole row.
 */
function writesIn(file: string, text: string): Map<string, Set<string>> {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found = new Map<string, Set<string>>();
  const add = (table: string, columns: string[]) => found.set(table, new Set([...(found.get(table) ?? []), ...columns]));
  const sql = (t: string) => {
    for (const m of t.matchAll(sqlWrite)) if (models.has(m[2]!)) add(m[2]!, sqlColumns(m[1]!, t.slice(m.index + m[0].length)));
  };
  const visit = (node: ts.Node) => {
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && writeMethods.has(node.expression.name.text)) {
      const delegate = node.expression.expression;
      const model = ts.isPropertyAccessExpression(delegate) ? byDelegate.get(delegate.name.text) : undefined;
      if (model) {
        add(model, callColumns(node.expression.name.text, node.arguments[0]));
        const nested = new Set<string>();
        for (const args of objectsIn(node.arguments[0])) {
          for (const k of ['data', 'create', 'update']) for (const d of objectsIn(property(args, k))) nestedModels(model, d, nested);
        }
        for (const related of nested) add(related, [ALL]);
      }
    }
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) sql(node.text);
    if (ts.isTemplateExpression(node)) sql([node.head.text, ...node.templateSpans.map((s) => s.literal.text)].join(' $ '));
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The tables one source text writes. */
const tablesWritten = (file: string, text: string) => new Set(writesIn(file, text).keys());

/** Every source file of src/domain/, as paths relative to it. */
function domainFiles(dir = domain): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return domainFiles(path);
    return /\.ts$/.test(entry.name) ? [relative(domain, path)] : [];
  });
}

/** Where a folder writes a table: the files, and the columns they set. */
interface Writes {
  files: string[];
  columns: Set<string>;
}
/** Each table written → the folders that write it. */
type Writers = Map<string, Map<string, Writes>>;

/** Each table written in src/domain/ → the folders (their files and columns) that write it. */
function writers(): Writers {
  const byTable: Writers = new Map();
  for (const file of domainFiles()) {
    const folder = file.includes('/') ? file.split('/')[0]! : file;
    for (const [table, columns] of writesIn(file, readFileSync(join(domain, file), 'utf8'))) {
      const folders = byTable.get(table) ?? new Map<string, Writes>();
      const before = folders.get(folder) ?? { files: [], columns: new Set<string>() };
      folders.set(folder, { files: [...before.files, file], columns: new Set([...before.columns, ...columns]) });
      byTable.set(table, folders);
    }
  }
  return byTable;
}

/** The owners section of docs/decisions.md. */
const ownersSection = (text: string) => text.split(/^## /m).find((s) => s.startsWith('Owners')) ?? '';

/** The map of owners: the section's table whose first column is the table and second its owner. */
function documentedOwners(text: string): Map<string, string> {
  const owners = new Map<string, string>();
  for (const [, table, owner] of ownersSection(text).matchAll(/^\| `(\w+)`\s*\| `(\w[\w-]*)\/`/gm)) owners.set(table!, owner!);
  return owners;
}

/** The one folder that writes columns of tables it does not own: manna/, which moves money. */
const MONEY = 'manna';

/** Manna's columns of tables it does not own: the section's table whose first column is the table and second its columns. */
function documentedMoneyColumns(text: string): Map<string, Set<string>> {
  const money = new Map<string, Set<string>>();
  for (const [, table, list] of ownersSection(text).matchAll(/^\| `(\w+)`\s*\|((?:\s*`\w+`,?)+)\s*\|/gm)) {
    money.set(table!, new Set([...list!.matchAll(/`(\w+)`/g)].map((c) => c[1]!)));
  }
  return money;
}

/** Columns of `table` that `folder` writes beyond what money allows it: all it writes, unless it is manna/ and the table is not its. */
function beyondMoney(table: string, folder: string, writes: Writes, owners: Map<string, string>, money: Map<string, Set<string>>) {
  if (folder !== MONEY || owners.get(table) === MONEY) return [...writes.columns];
  return [...writes.columns].filter((c) => !money.get(table)?.has(c));
}

/** Tables that two folders write as a whole (manna's writes within its money columns do not count). */
function sharedTables(written: Writers, owners: Map<string, string>, money: Map<string, Set<string>>) {
  return [...written].flatMap(([table, folders]) => {
    const claims = [...folders].filter(([folder, writes]) => beyondMoney(table, folder, writes, owners, money).length > 0);
    return claims.length > 1 ? [`${table}: ${claims.map(([f, w]) => `${f} (${w.files.join(', ')})`).join('; ')}`] : [];
  });
}

/** Writes by a folder other than the table's documented owner (manna's within its money columns excepted). */
function writesByOthers(written: Writers, owners: Map<string, string>, money: Map<string, Set<string>>) {
  return [...written].flatMap(([table, folders]) =>
    [...folders]
      .filter(([folder]) => folder !== owners.get(table))
      .flatMap(([folder, writes]) => {
        const beyond = beyondMoney(table, folder, writes, owners, money);
        if (!beyond.length) return [];
        const what = folder === MONEY ? ` in ${beyond.sort().join(', ')} (${writes.files.join(', ')}), not its money columns` : '';
        return [`${table} written by ${folder}/${what}, owned by ${owners.get(table)}/`];
      }),
  );
}

describe('the scan of writes', () => {
  const scan = (text: string) => [...tablesWritten('x.ts', text)].sort();

  it('finds Prisma writes on any client or transaction, and not reads', () => {
    expect(scan('await tx.message.create({ data: {} }); this.db.session.updateMany({});')).toEqual(['Message', 'Session']);
    expect(scan('db.message.findMany({}); tx.session.count(); db.user.aggregate({}); tx.task.findUnique({})')).toEqual([]);
    expect(scan('following.delete(id); this.store.update(x); deps.sessions.create(y)')).toEqual([]);
  });

  it('finds nested writes through relation fields', () => {
    expect(scan("db.agent.create({ data: { owner: { connect: { id } }, user: { create: { type: 'agent' } } } })")).toEqual([
      'Agent',
      'User',
    ]);
    expect(scan('db.user.create({ data: { platformSender: { create: { platform } } } })')).toEqual(['DeploymentSender', 'User']);
    expect(scan('db.collection.update({ where, data: { items: { connect: [{ id }] } } })')).toEqual(['Collection', 'CollectionCreation']);
  });

  it('finds SQL that writes, and not SQL that reads or locks', () => {
    expect(scan('db.$executeRaw`UPDATE "Session" AS s SET "title" = ${t} WHERE s.id = ${id}`')).toEqual(['Session']);
    expect(
      scan('tx.$queryRaw`WITH n AS (INSERT INTO "Message" ("id") VALUES (${id}) RETURNING 1) DELETE FROM "Memory" WHERE true`'),
    ).toEqual(['Memory', 'Message']);
    expect(scan('tx.$queryRaw`SELECT * FROM "Deployment" d WHERE d.id = ${id} FOR NO KEY UPDATE OF d`')).toEqual([]);
    expect(
      scan('tx.$queryRaw`INSERT INTO "DeploymentLease" ("deploymentId") VALUES (${id}) ON CONFLICT DO UPDATE SET "holder" = ${h}`'),
    ).toEqual(['DeploymentLease']);
    expect(scan('// the conditional UPDATE "Session" locks the row\nconst s = "SELECT 1 FROM \\"User\\" FOR UPDATE";')).toEqual([]);
  });
});

describe('the columns of a write, and the rule for money', () => {
  const columns = (text: string) => Object.fromEntries([...writesIn('x.ts', text)].map(([t, c]) => [t, [...c].sort()]));

  it("names the columns a Prisma write sets: data's keys, either branch of a condition; the whole row when it cannot tell", () => {
    expect(columns('tx.user.update({ where: { id }, data: { foreverBalance: { increment: a } } })')).toEqual({ User: ['foreverBalance'] });
    expect(columns("tx.user.update({ where, data: k === 's' ? { subscriptionBalance: x } : { foreverBalance: x } })")).toEqual({
      User: ['foreverBalance', 'subscriptionBalance'],
    });
    expect(columns('tx.session.updateMany({ where, data: { status, title: t } })')).toEqual({ Session: ['status', 'title'] });
    expect(columns('tx.user.update({ where, data: { [field]: 1 } })')).toEqual({ User: ['*'] });
    expect(columns('tx.user.update({ where, data: { ...patch, foreverBalance: 1 } })')).toEqual({ User: ['*', 'foreverBalance'] });
    expect(columns('tx.task.updateMany({ where, data })')).toEqual({ Task: ['*'] });
    expect(columns('tx.session.deleteMany({ where })')).toEqual({ Session: ['*'] });
    expect(columns('db.user.upsert({ where, create: { username }, update: { userImage } })')).toEqual({ User: ['userImage', 'username'] });
    expect(columns("db.agent.create({ data: { name, user: { create: { type: 'agent' } } } })")).toEqual({
      Agent: ['name', 'user'],
      User: ['*'],
    });
  });

  it("names the columns SQL sets: SET's assignments, INSERT's column list; the whole row for a delete", () => {
    expect(
      columns(
        'tx.$queryRaw`UPDATE "User" AS u SET "subscriptionBalance" = u."subscriptionBalance" - LEAST(b.s, ${v}::decimal), foreverBalance = 0 FROM before AS b WHERE u."id" = ${id}`',
      ),
    ).toEqual({ User: ['foreverBalance', 'subscriptionBalance'] });
    expect(
      columns('tx.$executeRaw`UPDATE "Session" SET "turnsSpent" = "turnsSpent" + ${n}, "updatedAt" = now() WHERE "id" = ${id}`'),
    ).toEqual({
      Session: ['turnsSpent', 'updatedAt'],
    });
    expect(columns('tx.$queryRaw`WITH x AS (UPDATE "Session" SET "title" = ${t} RETURNING 1) SELECT 1`')).toEqual({ Session: ['title'] });
    expect(columns('tx.$executeRaw`INSERT INTO "DeploymentCharge" ("taskId", "day") SELECT ${id}, now()`')).toEqual({
      DeploymentCharge: ['day', 'taskId'],
    });
    expect(columns('tx.$executeRaw`INSERT INTO "Memory" SELECT * FROM x`')).toEqual({ Memory: ['*'] });
    expect(columns('db.$executeRaw`DELETE FROM "Memory" WHERE true`')).toEqual({ Memory: ['*'] });
  });

  const docs = [
    '## Owners of tables',
    '| Table | Owner | What |',
    '| `User` | `creators/` | creators |',
    '| `MannaLedger` | `manna/` | moves |',
    '',
    '| Table | Money columns manna/ writes |',
    '| `User` | `subscriptionBalance`, `foreverBalance` |',
    '## Next',
  ].join('\n');
  const owners = documentedOwners(docs);
  const money = documentedMoneyColumns(docs);
  const by = (folder: string, ...columns: string[]): [string, Writes] => [
    folder,
    { files: [`${folder}/store.ts`], columns: new Set(columns) },
  ];
  const check = (table: string, ...folders: [string, Writes][]) => {
    const written: Writers = new Map([[table, new Map(folders)]]);
    return [...sharedTables(written, owners, money), ...writesByOthers(written, owners, money)];
  };

  it('reads the owners and the money columns from the docs', () => {
    expect(Object.fromEntries(owners)).toEqual({ User: 'creators', MannaLedger: 'manna' });
    expect(Object.fromEntries([...money].map(([t, c]) => [t, [...c]]))).toEqual({ User: ['subscriptionBalance', 'foreverBalance'] });
  });

  it('lets manna/ write the money columns of a table it does not own, and nothing else of it', () => {
    expect(check('User', by('creators', 'username'), by('manna', 'subscriptionBalance', 'foreverBalance'))).toEqual([]);
    expect(check('MannaLedger', by('manna', '*'))).toEqual([]);
    expect(check('User', by('creators', 'username'), by('manna', 'foreverBalance', 'username'))).toEqual([
      'User: creators (creators/store.ts); manna (manna/store.ts)',
      'User written by manna/ in username (manna/store.ts), not its money columns, owned by creators/',
    ]);
    expect(check('User', by('manna', '*'))).toEqual([
      'User written by manna/ in * (manna/store.ts), not its money columns, owned by creators/',
    ]);
  });

  it('gives no other folder that exception', () => {
    expect(check('User', by('creators', 'username'), by('sessions', 'foreverBalance'))).toEqual([
      'User: creators (creators/store.ts); sessions (sessions/store.ts)',
      'User written by sessions/, owned by creators/',
    ]);
    expect(check('MannaLedger', by('manna', '*'), by('tasks', 'reason'))).toEqual([
      'MannaLedger: manna (manna/store.ts); tasks (tasks/store.ts)',
      'MannaLedger written by tasks/, owned by manna/',
    ]);
  });
});

describe('owners', () => {
  const written = writers();
  const docs = readFileSync(join(root, 'docs/decisions.md'), 'utf8');
  const owners = documentedOwners(docs);
  const money = documentedMoneyColumns(docs);

  it('reads the writes of the whole domain', () => {
    expect(written.size).toBeGreaterThan(20);
    expect([...(written.get('MannaLedger')?.keys() ?? [])]).toHaveLength(1);
  });

  it('no table is written from two folders of src/domain/ (manna/ moving money in its columns apart)', () => {
    expect(sharedTables(written, owners, money)).toEqual([]);
  });

  it('each table is written by the owner docs/decisions.md names, and every table has one', () => {
    expect([...models.keys()].filter((m) => !owners.has(m))).toEqual([]);
    expect(writesByOthers(written, owners, money)).toEqual([]);
  });

  it("the money columns docs/decisions.md names are columns of tables manna/ does not own, and manna/ owns the ledger's tables", () => {
    expect([...money.keys()].length).toBeGreaterThan(0);
    for (const [table, columns] of money) {
      expect(owners.get(table), table).not.toBe(MONEY);
      expect(
        [...columns].filter((c) => !fields.get(table)?.has(c)),
        table,
      ).toEqual([]);
    }
    expect([owners.get('MannaLedger'), owners.get('DeploymentCharge')]).toEqual([MONEY, MONEY]);
  });

  it('src/domain/core/, the kernel every service shares, writes no table', () => {
    expect([...written].filter(([, folders]) => folders.has('core')).map(([table]) => table)).toEqual([]);
  });
});
