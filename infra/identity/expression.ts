/**
 * A small evaluator for the expression subset that docline's trust decisions are written in:
 * Google's workload identity attribute conditions (CEL) and GitHub Actions job conditions (`if:`).
 * It exists so that tests evaluate the very strings Google and GitHub are given, on the claims and
 * events that matter, instead of re-stating what they should mean.
 *
 * Supported: string, number, boolean and null literals; list literals `[a, b]`; member access
 * `a.b.c` (names may contain `-`, as GitHub's do); `==`, `!=`, `&&`, `||`, `!`, `+` (string
 * concatenation), `x in [list]`, parentheses, and calls of the functions the caller provides, as
 * `f(x)` or as a method `x.f(y)` (which calls `f(x, y)`).
 *
 * Two dialects differ on a missing member: CEL raises an error (and `&&`/`||` absorb it when the
 * other side decides, as CEL specifies), GitHub yields null.
 */

/** How a missing member is read: CEL raises an error, GitHub Actions reads null. */
export type Dialect = 'cel' | 'github';

/** A value an expression can produce. */
export type Value = string | number | boolean | null | Value[] | { [key: string]: Value };

/** Raised for a malformed expression, and (in CEL) for reading a member that does not exist. */
export class ExpressionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ExpressionError';
  }
}

type Token = { kind: 'str' | 'num' | 'name' | 'op'; text: string };

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < source.length) {
    const c = source[i]!;
    if (/\s/.test(c)) {
      i += 1;
    } else if (c === "'" || c === '"') {
      let j = i + 1;
      let text = '';
      while (j < source.length && source[j] !== c) {
        if (source[j] === '\\' && j + 1 < source.length) j += 1;
        text += source[j];
        j += 1;
      }
      if (j >= source.length) throw new ExpressionError(`unterminated string at ${i}`);
      tokens.push({ kind: 'str', text });
      i = j + 1;
    } else if (/[0-9]/.test(c)) {
      const m = /^[0-9]+(\.[0-9]+)?/.exec(source.slice(i))!;
      tokens.push({ kind: 'num', text: m[0] });
      i += m[0].length;
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_-]*/.exec(source.slice(i))!;
      tokens.push({ kind: 'name', text: m[0] });
      i += m[0].length;
    } else {
      const two = source.slice(i, i + 2);
      if (['==', '!=', '&&', '||'].includes(two)) {
        tokens.push({ kind: 'op', text: two });
        i += 2;
      } else if ('!()[],.+'.includes(c)) {
        tokens.push({ kind: 'op', text: c });
        i += 1;
      } else {
        throw new ExpressionError(`unexpected character '${c}' at ${i}`);
      }
    }
  }
  return tokens;
}

type Node =
  | { type: 'lit'; value: Value }
  | { type: 'list'; items: Node[] }
  | { type: 'name'; name: string }
  | { type: 'member'; object: Node; name: string }
  | { type: 'call'; name: string; args: Node[] }
  | { type: 'method'; object: Node; name: string; args: Node[] }
  | { type: 'not'; operand: Node }
  | { type: 'binary'; op: string; left: Node; right: Node };

/** Lowest to highest binding. */
const LEVELS = [['||'], ['&&'], ['==', '!=', 'in'], ['+']];

function parse(source: string): Node {
  const tokens = tokenize(source);
  let at = 0;
  const peek = () => tokens[at];
  const isOp = (text: string) => {
    const t = peek();
    return t !== undefined && (t.kind === 'op' || (t.kind === 'name' && text === 'in')) && t.text === text;
  };
  const expect = (text: string) => {
    if (!isOp(text)) throw new ExpressionError(`expected '${text}' in ${source}`);
    at += 1;
  };
  const binary = (level: number): Node => {
    if (level === LEVELS.length) return unary();
    let left = binary(level + 1);
    for (;;) {
      const op = LEVELS[level]!.find((o) => isOp(o));
      if (op === undefined) return left;
      at += 1;
      left = { type: 'binary', op, left, right: binary(level + 1) };
    }
  };
  const unary = (): Node => {
    if (isOp('!')) {
      at += 1;
      return { type: 'not', operand: unary() };
    }
    let node = primary();
    while (isOp('.')) {
      at += 1;
      const t = peek();
      if (t?.kind !== 'name') throw new ExpressionError(`expected a member name in ${source}`);
      at += 1;
      if (isOp('(')) {
        at += 1;
        node = { type: 'method', object: node, name: t.text, args: list(')') };
      } else {
        node = { type: 'member', object: node, name: t.text };
      }
    }
    return node;
  };
  const list = (close: string): Node[] => {
    const items: Node[] = [];
    while (!isOp(close)) {
      items.push(binary(0));
      if (!isOp(close)) expect(',');
    }
    at += 1;
    return items;
  };
  const primary = (): Node => {
    const t = peek();
    if (t === undefined) throw new ExpressionError(`unexpected end of ${source}`);
    at += 1;
    if (t.kind === 'str') return { type: 'lit', value: t.text };
    if (t.kind === 'num') return { type: 'lit', value: Number(t.text) };
    if (t.kind === 'name') {
      if (t.text === 'true' || t.text === 'false') return { type: 'lit', value: t.text === 'true' };
      if (t.text === 'null') return { type: 'lit', value: null };
      if (isOp('(')) {
        at += 1;
        return { type: 'call', name: t.text, args: list(')') };
      }
      return { type: 'name', name: t.text };
    }
    if (t.text === '(') {
      const inner = binary(0);
      expect(')');
      return inner;
    }
    if (t.text === '[') return { type: 'list', items: list(']') };
    throw new ExpressionError(`unexpected '${t.text}' in ${source}`);
  };
  const root = binary(0);
  if (at !== tokens.length) throw new ExpressionError(`unexpected '${tokens[at]!.text}' in ${source}`);
  return root;
}

/** What an expression can read: its variables, and the functions it may call. */
export interface Scope {
  readonly variables: Readonly<Record<string, Value>>;
  readonly functions?: Readonly<Record<string, (...args: Value[]) => Value>>;
}

/** GitHub's number coercion for a loose comparison: null is 0, booleans 1 and 0, strings parsed. */
function asNumber(v: Value): number {
  if (v === null) return 0;
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'number') return v;
  if (typeof v === 'string') return v.trim() === '' ? 0 : Number(v);
  return Number.NaN;
}

/**
 * GitHub compares strings case-insensitively and, across types, as numbers (so a missing input,
 * null, equals ''); CEL compares strictly.
 */
function equal(a: Value, b: Value, dialect: Dialect): boolean {
  if (dialect === 'github') {
    if (typeof a === 'string' && typeof b === 'string') return a.toLowerCase() === b.toLowerCase();
    if (typeof a !== typeof b || a === null || b === null) return asNumber(a) === asNumber(b);
  }
  return JSON.stringify(a) === JSON.stringify(b);
}

function truthy(v: Value, dialect: Dialect): boolean {
  if (dialect === 'cel') {
    if (typeof v !== 'boolean') throw new ExpressionError(`CEL needs a boolean, got ${JSON.stringify(v)}`);
    return v;
  }
  return !(v === null || v === false || v === 0 || v === '');
}

function evaluateNode(node: Node, scope: Scope, dialect: Dialect): Value {
  const ev = (n: Node) => evaluateNode(n, scope, dialect);
  switch (node.type) {
    case 'lit':
      return node.value;
    case 'list':
      return node.items.map(ev);
    case 'name': {
      if (node.name in scope.variables) return scope.variables[node.name]!;
      if (dialect === 'cel') throw new ExpressionError(`no variable ${node.name}`);
      return null;
    }
    case 'member': {
      const object = ev(node.object);
      if (object !== null && typeof object === 'object' && !Array.isArray(object) && node.name in object) {
        return object[node.name]!;
      }
      if (dialect === 'cel') throw new ExpressionError(`no such key: ${node.name}`);
      return null;
    }
    case 'call': {
      const fn = scope.functions?.[node.name];
      if (fn === undefined) throw new ExpressionError(`unknown function ${node.name}()`);
      return fn(...node.args.map(ev));
    }
    case 'method': {
      const fn = scope.functions?.[node.name];
      if (fn === undefined) throw new ExpressionError(`unknown method .${node.name}()`);
      return fn(ev(node.object), ...node.args.map(ev));
    }
    case 'not':
      return !truthy(ev(node.operand), dialect);
    case 'binary': {
      if (node.op === '&&' || node.op === '||') {
        // CEL: an error on one side is absorbed when the other side alone decides (commutative).
        const decides = node.op === '||';
        const side = (n: Node): boolean | ExpressionError => {
          try {
            return truthy(ev(n), dialect);
          } catch (e) {
            if (dialect === 'cel' && e instanceof ExpressionError) return e;
            throw e;
          }
        };
        const left = side(node.left);
        if (left === decides) return decides;
        const right = side(node.right);
        if (right === decides) return decides;
        if (left instanceof ExpressionError) throw left;
        if (right instanceof ExpressionError) throw right;
        return !decides;
      }
      const left = ev(node.left);
      const right = ev(node.right);
      if (node.op === '==') return equal(left, right, dialect);
      if (node.op === '!=') return !equal(left, right, dialect);
      if (node.op === 'in') {
        if (!Array.isArray(right)) throw new ExpressionError('`in` needs a list on its right');
        return right.some((item) => equal(left, item, dialect));
      }
      if (typeof left !== 'string' || typeof right !== 'string') {
        throw new ExpressionError('`+` joins strings only');
      }
      return left + right;
    }
  }
}

/** Evaluates `source` in `scope`; throws ExpressionError when it is malformed or (CEL) reads a missing member. */
export function evaluate(source: string, scope: Scope, dialect: Dialect): Value {
  return evaluateNode(parse(source), scope, dialect);
}

/** Whether `source` holds in `scope`, read as the dialect's runtime reads a condition. */
export function holds(source: string, scope: Scope, dialect: Dialect): boolean {
  return truthy(evaluate(source, scope, dialect), dialect);
}
