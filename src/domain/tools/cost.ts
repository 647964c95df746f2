/**
 * Cost estimates are small arithmetic expressions over a tool's arguments, such as
 * `1 * n_samples` or `max(1, 0.5 * duration)`. They are parsed once when the registry loads (so
 * a typo stops start-up) and evaluated without `eval`.
 */
export type CostExpr =
  | { kind: 'num'; value: number }
  | { kind: 'var'; name: string }
  | { kind: 'neg'; arg: CostExpr }
  | { kind: 'bin'; op: '+' | '-' | '*' | '/'; left: CostExpr; right: CostExpr }
  | { kind: 'call'; fn: keyof typeof functions; args: CostExpr[] };

const functions = {
  min: (...xs: number[]) => Math.min(...xs),
  max: (...xs: number[]) => Math.max(...xs),
  ceil: (x: number) => Math.ceil(x),
  floor: (x: number) => Math.floor(x),
} as const;

const tokenPattern = /\s*(\d+(?:\.\d+)?|[A-Za-z_][A-Za-z0-9_]*|[-+*/(),])\s*/y;

function tokenize(source: string): string[] {
  const tokens: string[] = [];
  tokenPattern.lastIndex = 0;
  while (tokenPattern.lastIndex < source.length) {
    const at = tokenPattern.lastIndex;
    const match = tokenPattern.exec(source);
    if (!match) throw new Error(`cannot read "${source.slice(at).trim()}" in "${source}"`);
    tokens.push(match[1]!);
  }
  return tokens;
}

export function parseCost(source: string): CostExpr {
  const tokens = tokenize(source);
  let at = 0;
  const peek = () => tokens[at];
  const take = (expected?: string) => {
    const t = tokens[at++];
    if (t === undefined || (expected && t !== expected)) throw new Error(`expected ${expected ?? 'a value'} in "${source}"`);
    return t;
  };
  const expr = (): CostExpr => {
    let left = term();
    while (peek() === '+' || peek() === '-') left = { kind: 'bin', op: take() as '+' | '-', left, right: term() };
    return left;
  };
  const term = (): CostExpr => {
    let left = factor();
    while (peek() === '*' || peek() === '/') left = { kind: 'bin', op: take() as '*' | '/', left, right: factor() };
    return left;
  };
  const factor = (): CostExpr => {
    const t = take();
    if (t === '-') return { kind: 'neg', arg: factor() };
    if (t === '(') {
      const inner = expr();
      take(')');
      return inner;
    }
    if (/^\d/.test(t)) return { kind: 'num', value: Number(t) };
    if (!/^[A-Za-z_]/.test(t)) throw new Error(`unexpected "${t}" in "${source}"`);
    if (peek() !== '(') return { kind: 'var', name: t };
    if (!Object.hasOwn(functions, t)) throw new Error(`unknown function ${t}() in "${source}"`);
    take('(');
    const args = [expr()];
    while (peek() === ',') {
      take(',');
      args.push(expr());
    }
    take(')');
    return { kind: 'call', fn: t as keyof typeof functions, args };
  };
  const tree = expr();
  if (at !== tokens.length) throw new Error(`unexpected "${tokens[at]}" in "${source}"`);
  return tree;
}

export function costVariables(e: CostExpr): string[] {
  switch (e.kind) {
    case 'num':
      return [];
    case 'var':
      return [e.name];
    case 'neg':
      return costVariables(e.arg);
    case 'bin':
      return [...costVariables(e.left), ...costVariables(e.right)];
    case 'call':
      return e.args.flatMap(costVariables);
  }
}

export function evaluateCost(e: CostExpr, vars: Record<string, number>): number {
  switch (e.kind) {
    case 'num':
      return e.value;
    case 'var': {
      const v = vars[e.name];
      if (typeof v !== 'number' || !Number.isFinite(v)) throw new Error(`cost needs a number for ${e.name}`);
      return v;
    }
    case 'neg':
      return -evaluateCost(e.arg, vars);
    case 'bin': {
      const [l, r] = [evaluateCost(e.left, vars), evaluateCost(e.right, vars)];
      return e.op === '+' ? l + r : e.op === '-' ? l - r : e.op === '*' ? l * r : l / r;
    }
    case 'call':
      return (functions[e.fn] as (...xs: number[]) => number)(...e.args.map((a) => evaluateCost(a, vars)));
  }
}
