import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import ts from 'typescript';

/**
 * Checks JSON against a type declared in the published SDK's own `.d.ts` files, read with the
 * TypeScript compiler: what an integration of the original was promised, not our idea of it.
 * The declarations import each other as `src/models/...` (the SDK's source layout), so that
 * prefix is mapped onto `dist/`. JSON has no dates: a `Date` is an ISO 8601 string on the wire.
 * Extra fields are allowed (TypeScript object types allow them too); a missing required field,
 * a wrong type, a value outside a literal union or an enum is reported with its path.
 */
export function sdkTypes() {
  const require = createRequire(import.meta.url);
  const root = dirname(require.resolve('@edenlabs/eden-sdk/package.json'));
  const program = ts.createProgram([join(root, 'dist/index.d.ts')], {
    strict: true,
    noEmit: true,
    baseUrl: root,
    paths: { 'src/*': ['dist/*'] },
    moduleResolution: ts.ModuleResolutionKind.Node10,
    types: [],
  });
  const unresolved = ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.code === 2307)
    .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  if (unresolved.length) throw new Error(`the SDK's declarations do not resolve: ${unresolved.join('; ')}`);
  const checker = program.getTypeChecker();
  const entry = checker.getSymbolAtLocation(program.getSourceFile(join(root, 'dist/index.d.ts'))!)!;
  const exported = new Map(checker.getExportsOfModule(entry).map((s) => [s.name, s]));

  function typeNamed(name: string): ts.Type {
    let symbol = exported.get(name);
    if (!symbol) throw new Error(`the SDK exports no type ${name}`);
    if (symbol.flags & ts.SymbolFlags.Alias) symbol = checker.getAliasedSymbol(symbol);
    return checker.getDeclaredTypeOfSymbol(symbol);
  }

  const isIsoDate = (v: unknown) =>
    typeof v === 'string' && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(v) && !Number.isNaN(Date.parse(v));

  function check(value: unknown, type: ts.Type, path: string, problems: string[], seen: number): undefined {
    const f = type.flags;
    const fail = (what: string): undefined =>
      void problems.push(`${path || '(root)'}: ${what}, got ${JSON.stringify(value)?.slice(0, 80)}`);
    if (f & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return;
    if (type.isUnion()) {
      for (const member of type.types) {
        const inner: string[] = [];
        check(value, member, path, inner, seen);
        if (!inner.length) return;
      }
      return fail(`expected ${checker.typeToString(type)}`);
    }
    if (type.isIntersection()) {
      if (type.types.every((t) => t.flags & ts.TypeFlags.Object && !isDate(t))) return checkObject(value, type, path, problems, seen);
      for (const member of type.types) check(value, member, path, problems, seen);
      return;
    }
    if (type.isStringLiteral() || type.isNumberLiteral()) {
      if (value !== type.value) fail(`expected ${JSON.stringify(type.value)}`);
      return;
    }
    if (f & ts.TypeFlags.BooleanLiteral) {
      if (value !== (checker.typeToString(type) === 'true')) fail(`expected ${checker.typeToString(type)}`);
      return;
    }
    if (f & ts.TypeFlags.String) return void (typeof value !== 'string' && fail('expected a string'));
    if (f & ts.TypeFlags.Number) return void (typeof value !== 'number' && fail('expected a number'));
    if (f & ts.TypeFlags.Boolean) return void (typeof value !== 'boolean' && fail('expected a boolean'));
    if (f & ts.TypeFlags.Null) return void (value !== null && fail('expected null'));
    if (f & ts.TypeFlags.Undefined) return void (value !== undefined && fail('expected nothing'));
    if (f & ts.TypeFlags.Object) {
      if (isDate(type)) return void (!isIsoDate(value) && fail('expected a date (ISO 8601 string)'));
      return checkObject(value, type, path, problems, seen);
    }
    fail(`cannot check values of type ${checker.typeToString(type)}`);
  }

  const isDate = (type: ts.Type) => type.getSymbol()?.name === 'Date';

  function checkObject(value: unknown, type: ts.Type, path: string, problems: string[], seen: number): undefined {
    if (checker.isArrayType(type) || checker.isTupleType(type)) {
      if (!Array.isArray(value)) return void problems.push(`${path}: expected an array, got ${JSON.stringify(value)?.slice(0, 80)}`);
      const element = checker.getTypeArguments(type as ts.TypeReference)[0]!;
      value.forEach((v, i) => check(v, element, `${path}[${i}]`, problems, seen + 1));
      return;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      return void problems.push(
        `${path || '(root)'}: expected an object (${checker.typeToString(type)}), got ${JSON.stringify(value)?.slice(0, 80)}`,
      );
    }
    // Deep self-references (an agent's deployments' agent) stop where the data does; this is a guard only.
    if (seen > 12) return;
    const record = value as Record<string, unknown>;
    const properties = checker.getPropertiesOfType(type);
    for (const property of properties) {
      const at = path ? `${path}.${property.name}` : property.name;
      const v = record[property.name];
      if (v === undefined) {
        if (!(property.flags & ts.SymbolFlags.Optional)) problems.push(`${at}: required by the SDK's type, missing`);
        continue;
      }
      check(v, checker.getTypeOfSymbol(property), at, problems, seen + 1);
    }
    const index = checker.getIndexInfoOfType(type, ts.IndexKind.String);
    if (index) {
      const named = new Set(properties.map((p) => p.name));
      for (const [key, v] of Object.entries(record)) if (!named.has(key)) check(v, index.type, `${path}.${key}`, problems, seen + 1);
    }
  }

  return {
    /** Every way `value` breaks the SDK's exported type `name`; empty when it conforms. */
    problems(name: string, value: unknown): string[] {
      const problems: string[] = [];
      check(value, typeNamed(name), '', problems, 0);
      return problems;
    },
    /** The names of the properties the SDK's type `name` requires (for tests that must not pass vacuously). */
    required(name: string): string[] {
      return checker
        .getPropertiesOfType(typeNamed(name))
        .filter((p) => !(p.flags & ts.SymbolFlags.Optional))
        .map((p) => p.name);
    },
  };
}
