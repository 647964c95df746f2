import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type DocumentNode, Kind, type OperationDefinitionNode, parse } from 'graphql';
import ts from 'typescript';

/** The playground's sources, as Vite builds them into the page. */
const SOURCES = fileURLToPath(new URL('../../playground/src/', import.meta.url));

export interface PlaygroundDocument {
  /** Where it is declared: `triggers.tsx` and the constant's name. */
  file: string;
  constant: string;
  text: string;
  document: DocumentNode;
  operation: OperationDefinitionNode;
}

/** A module's top-level string constants, with the names it imports from its neighbours. */
interface Module {
  constants: Map<string, ts.Expression>;
  imports: Map<string, string>;
  source: ts.SourceFile;
}

function readModule(file: string): Module {
  const source = ts.createSourceFile(file, readFileSync(`${SOURCES}${file}`, 'utf8'), ts.ScriptTarget.Latest, true, ts.ScriptKind.TSX);
  const constants = new Map<string, ts.Expression>();
  const imports = new Map<string, string>();
  for (const statement of source.statements) {
    if (ts.isVariableStatement(statement)) {
      for (const d of statement.declarationList.declarations)
        if (ts.isIdentifier(d.name) && d.initializer) constants.set(d.name.text, d.initializer);
    } else if (ts.isImportDeclaration(statement) && ts.isStringLiteral(statement.moduleSpecifier)) {
      const from = statement.moduleSpecifier.text;
      const named = statement.importClause?.namedBindings;
      if (from.startsWith('./') && named && ts.isNamedImports(named))
        for (const element of named.elements) imports.set(element.name.text, from.slice(2));
    }
  }
  return { constants, imports, source };
}

/**
 * Every GraphQL document the playground sends, read from its sources as the page has them: each
 * top-level constant whose text (its template literal with the constants it interpolates, from
 * the same file or imported from a neighbour) is a GraphQL operation. Nothing is copied here, so a
 * document changed in the page is the document checked.
 */
export function playgroundDocuments(): PlaygroundDocument[] {
  const files = readdirSync(SOURCES).filter((f) => /\.tsx?$/.test(f));
  const modules = new Map(files.map((f) => [f, readModule(f)]));
  const textOf = (file: string, name: string, seen: string[] = []): string | null => {
    const module = modules.get(file);
    if (!module || seen.includes(`${file}:${name}`)) return null;
    const imported = module.imports.get(name);
    if (imported) return textOf(imported, name, [...seen, `${file}:${name}`]);
    const value = module.constants.get(name);
    if (!value) return null;
    const expression = (e: ts.Expression): string | null => {
      if (ts.isStringLiteral(e) || ts.isNoSubstitutionTemplateLiteral(e)) return e.text;
      if (ts.isTemplateExpression(e)) {
        let text = e.head.text;
        for (const span of e.templateSpans) {
          if (!ts.isIdentifier(span.expression)) return null;
          const part = textOf(file, span.expression.text, [...seen, `${file}:${name}`]);
          if (part === null) return null;
          text += part + span.literal.text;
        }
        return text;
      }
      return null;
    };
    return expression(value);
  };
  const found: PlaygroundDocument[] = [];
  for (const [file, module] of modules) {
    for (const constant of module.constants.keys()) {
      if (module.imports.has(constant)) continue;
      const text = textOf(file, constant);
      if (text === null || !/^\s*(query|mutation|subscription)\b/.test(text)) continue;
      const document = parse(text);
      const operation = document.definitions.find((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION)!;
      found.push({ file, constant, text, document, operation });
    }
  }
  return found;
}

/**
 * The constants the page hands to `request(key, X, ...)` or as `{ query: X }` to a subscription:
 * each must be one of `playgroundDocuments()` (a document built some other way would escape the check).
 */
export function documentsSent(): { file: string; constant: string }[] {
  const sent: { file: string; constant: string }[] = [];
  for (const file of readdirSync(SOURCES).filter((f) => /\.tsx?$/.test(f))) {
    const module = readModule(file);
    const isConstant = (e: ts.Node | undefined): e is ts.Identifier =>
      e !== undefined && ts.isIdentifier(e) && (module.constants.has(e.text) || module.imports.has(e.text));
    const where = (name: string) => ({ file: module.imports.get(name) ?? file, constant: name });
    const visit = (node: ts.Node) => {
      if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'request') {
        const query = node.arguments[1];
        if (isConstant(query)) sent.push(where(query.text));
      }
      if (ts.isPropertyAssignment(node) && ts.isIdentifier(node.name) && node.name.text === 'query' && isConstant(node.initializer))
        sent.push(where(node.initializer.text));
      if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'act') {
        const query = node.arguments[0];
        if (isConstant(query)) sent.push(where(query.text));
      }
      ts.forEachChild(node, visit);
    };
    visit(module.source);
  }
  return sent;
}
