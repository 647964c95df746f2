import { z } from 'zod';

/**
 * How a setting is declared, read and described. `src/config.ts` declares every setting once,
 * in a tree shaped like the `Config` it builds; the type of `Config`, the parsing of the
 * environment, `parley serve --help` and the table in docs/configuration.md all come from there.
 */

interface Described {
  /** What it does, for operators: the help text and the documentation's table. */
  readonly meaning: string;
  /** What applies while it is not set, when that is not simply nothing (`DATA_DIR/media`, say). */
  readonly unset?: string;
}

/** One environment variable: its name, how it is read (zod coerces and checks) and its default. */
export interface Setting<N extends string = string, T = unknown> extends Described {
  readonly kind: 'setting';
  readonly name: N;
  /** The check, with the default (or `.optional()`) applied. */
  readonly schema: z.ZodType<T>;
  readonly fallback: T | undefined;
}

/** A part of `Config` made from several settings, or from one that needs reshaping. */
export interface Derived<T> {
  readonly kind: 'derived';
  readonly reads: readonly Setting<string, any>[];
  readonly value: (values: Record<string, unknown>) => T;
}

/** A family of variables named by a pattern (`RATE_LIMIT_<TIER>`), read apart from the fixed ones. */
export interface Family<T> extends Described {
  readonly kind: 'family';
  /** As the documentation shows it, `<...>` standing for the variable part. */
  readonly name: string;
  readonly pattern: RegExp;
  readonly key: (suffix: string) => string;
  /** The value, or undefined when it is not one (the problem then says what it must be). */
  readonly read: (value: string) => T | undefined;
  readonly problem: string;
  readonly defaults: Record<string, T>;
}

type Leaf = Setting<string, any> | Derived<unknown> | Family<unknown>;
export interface Declarations {
  readonly [key: string]: Leaf | Declarations;
}

export function setting<N extends string, T>(name: N, check: z.ZodType<T>, doc: Described & { default: NoInfer<T> }): Setting<N, T>;
export function setting<N extends string, T>(name: N, check: z.ZodType<T>, doc: Described): Setting<N, T | undefined>;
export function setting<N extends string, T>(name: N, check: z.ZodType<T>, doc: Described & { default?: T }): Setting<N, T | undefined> {
  const { default: fallback, ...described } = doc;
  const schema = fallback === undefined ? check.optional() : check.default(fallback as never);
  return { kind: 'setting', name, schema: schema as z.ZodType<T | undefined>, fallback, ...described };
}

type Values<S extends readonly Setting<string, any>[]> = { [X in S[number] as X['name']]: X extends Setting<string, infer T> ? T : never };

/** A value made from the settings `reads` names; `refuse` inside stops the start with a problem. */
export function derive<const S extends readonly Setting<string, any>[], T>(reads: S, value: (values: Values<S>) => T): Derived<T> {
  return { kind: 'derived', reads, value: value as (values: Record<string, unknown>) => T };
}

export function family<T>(declared: Omit<Family<T>, 'kind'>): Family<T> {
  return { kind: 'family', ...declared };
}

/** Thrown by `refuse`; reading the environment turns it into a problem that names the setting. */
class Refusal extends Error {
  constructor(
    readonly setting: string,
    readonly reason: string,
  ) {
    super(`${setting}: ${reason}`);
  }
}

/** A rule between settings failed (each setting alone was fine): the start stops, naming `setting`. */
export function refuse(setting: string, reason: string): never {
  throw new Refusal(setting, reason);
}

type ValueOf<L> =
  L extends Setting<string, infer T>
    ? T
    : L extends Derived<infer T>
      ? T
      : L extends Family<infer T>
        ? Record<string, T>
        : L extends Declarations
          ? Shape<L>
          : never;
/** The object a tree of declarations reads into. */
export type Shape<D> = { [K in keyof D]: ValueOf<D[K]> };

const isLeaf = (node: Leaf | Declarations): node is Leaf => typeof node.kind === 'string';

/** One variable (or family) and where its value goes in `Config` (a derived value's place, for those it reads). */
export interface Entry {
  readonly declared: Setting<string, any> | Family<unknown>;
  readonly places: string[];
}

/** Every variable in the order of the tree; two declarations of one name are a mistake. */
export function entries(tree: Declarations): Entry[] {
  const found = new Map<string, Entry>();
  const add = (declared: Entry['declared'], place: string) => {
    const entry = found.get(declared.name);
    if (entry && entry.declared !== declared) throw new Error(`${declared.name} is declared twice`);
    if (entry) entry.places.push(place);
    else found.set(declared.name, { declared, places: [place] });
  };
  const walk = (node: Declarations, path: string[]) => {
    for (const [key, child] of Object.entries(node)) {
      const place = [...path, key].join('.');
      if (!isLeaf(child)) walk(child, [...path, key]);
      else if (child.kind === 'derived') for (const read of child.reads) add(read, place);
      else add(child, place);
    }
  };
  walk(tree, []);
  return [...found.values()];
}

/** The members of each family found in `env`: variables declared on their own never count as one. */
function readFamily<T>(declared: Family<T>, env: Record<string, string>, fixed: Set<string>) {
  const values = { ...declared.defaults };
  const problems: string[] = [];
  for (const [name, text] of Object.entries(env)) {
    const suffix = declared.pattern.exec(name)?.[1];
    if (suffix === undefined || fixed.has(name)) continue;
    const value = declared.read(text);
    if (value === undefined) problems.push(`${name}: ${declared.problem}`);
    else values[declared.key(suffix)] = value;
  }
  return { values, problems };
}

/** The derived values, whose `refuse` rules are checked with the settings themselves. */
function derivedOf(tree: Declarations): Derived<unknown>[] {
  return Object.values(tree).flatMap((child) => (!isLeaf(child) ? derivedOf(child) : child.kind === 'derived' ? [child] : []));
}

/** What reading a tree needs, worked out once per tree: zod compiles an object schema on its first use. */
function compile(tree: Declarations) {
  const all = entries(tree).map((e) => e.declared);
  const settings = all.filter((d): d is Setting<string, any> => d.kind === 'setting');
  const derived = derivedOf(tree);
  const schema = z.object(Object.fromEntries(settings.map((s) => [s.name, s.schema]))).superRefine((values, context) => {
    for (const d of derived)
      try {
        d.value(values);
      } catch (e) {
        if (!(e instanceof Refusal)) throw e;
        context.addIssue({ code: 'custom', path: [e.setting], message: e.reason });
      }
  });
  const families = all.filter((d): d is Family<unknown> => d.kind === 'family');
  return { schema, families, fixed: new Set(settings.map((s) => s.name)) };
}
const compiled = new WeakMap<Declarations, ReturnType<typeof compile>>();

/**
 * Reads `env` (an empty value counts as unset) into the shape of `tree`, or lists every problem:
 * each setting that fails its own check, then the rules between settings (zod runs those unless
 * a value could not be read at all, such as a number that is not one), then the families'.
 */
export function read<D extends Declarations>(
  tree: D,
  env: Record<string, string | undefined>,
): { value: Shape<D> } | { problems: string[] } {
  const reader = compiled.get(tree) ?? compiled.set(tree, compile(tree)).get(tree)!;
  const given = Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ''));
  const families = new Map(reader.families.map((f) => [f, readFamily(f, given, reader.fixed)]));
  const parsed = reader.schema.safeParse(given);
  const problems = [
    ...(parsed.error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`) ?? []),
    ...[...families.values()].flatMap((f) => f.problems),
  ];
  if (!parsed.success || problems.length) return { problems };
  const build = (node: Declarations): Record<string, unknown> =>
    Object.fromEntries(
      Object.entries(node).map(([key, child]) => {
        if (!isLeaf(child)) return [key, build(child)];
        if (child.kind === 'setting') return [key, parsed.data[child.name]];
        return [key, child.kind === 'family' ? families.get(child)!.values : child.value(parsed.data)];
      }),
    );
  return { value: build(tree) as Shape<D> };
}

/** A variable as the help text and the documentation show it. */
export interface Row {
  name: string;
  /** Markdown: a value in backticks, or words. */
  default: string;
  meaning: string;
  /** Where its value goes in `Config`. */
  places: string[];
}

const shownDefault = (declared: Entry['declared']): string => {
  if (declared.kind === 'family')
    return Object.entries(declared.defaults)
      .map(([key, value]) => `\`${declared.name.replace(/<[^>]+>/, key.toUpperCase())}=${value}\``)
      .join(', ');
  if (declared.fallback === undefined) return declared.unset ?? 'unset';
  return declared.fallback === '' ? 'empty' : `\`${declared.fallback}\``;
};

export const rows = (tree: Declarations): Row[] =>
  entries(tree).map(({ declared, places }) => ({
    name: declared.name,
    default: shownDefault(declared),
    meaning: declared.meaning,
    places,
  }));

/** The rows as a Markdown table, its columns padded as Biome pads them. */
export function markdownTable(tree: Declarations): string {
  const cells = [
    ['Variable', 'Default', 'Meaning', 'In `Config`'],
    ...rows(tree).map((r) => [`\`${r.name}\``, r.default, r.meaning, r.places.map((p) => `\`${p}\``).join(', ')]),
  ];
  const widths = cells[0]!.map((_, column) => Math.max(...cells.map((row) => row[column]!.length)));
  const line = (row: string[]) => `| ${row.map((cell, column) => cell.padEnd(widths[column]!)).join(' | ')} |`;
  return [line(cells[0]!), line(widths.map((w) => '-'.repeat(w))), ...cells.slice(1).map(line)].join('\n');
}

/** Words wrapped to `width` columns, every line after the first indented by `indent`. */
function wrap(text: string, width: number, indent: number): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > width - indent) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  lines.push(line);
  return lines.join(`\n${' '.repeat(indent)}`);
}

/** The settings for `--help`: each name, then what it means and its default, for a terminal. */
export function helpText(tree: Declarations): string {
  const plain = (markdown: string) => markdown.replaceAll('`', '');
  const all = rows(tree);
  const column = Math.max(...all.map((r) => r.name.length)) + 4;
  return all
    .map((r) => {
      const meaning = r.default === 'unset' ? r.meaning : `${r.meaning} (default: ${r.default})`;
      return `  ${r.name.padEnd(column - 2)}${wrap(plain(meaning), 100, column)}`;
    })
    .join('\n');
}

const tableStart = '<!-- The table below is written by scripts/configuration-table.ts from src/config.ts. -->\n';

/** The Markdown table of settings in a document, and the text around it. */
export function tableInDocument(document: string): { before: string; table: string; after: string } {
  const start = document.indexOf(tableStart);
  if (start < 0) throw new Error(`the document has no line "${tableStart.trim()}"`);
  const from = start + tableStart.length;
  const lines = document.slice(from).split('\n');
  const end = lines.findIndex((line) => !line.startsWith('|'));
  const table = lines.slice(0, end < 0 ? lines.length : end).join('\n');
  return { before: document.slice(0, from), table, after: document.slice(from + table.length + 1) };
}
