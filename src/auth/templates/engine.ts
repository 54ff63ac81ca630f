/**
 * The Go-template subset of GoTrue's email templates (docs/emails.md), so that a Supabase
 * project's templates work unchanged:
 *   {{ .Name }}  {{ .Data.key.sub }}                a variable (HTML-escaped in HTML)
 *   {{ if C }} … {{ else if C }} … {{ else }} … {{ end }}
 *       where C is `.Var`, `not .Var`, `eq .Var "text"` or `ne .Var "text"`
 *   {{/* a comment *\/}}   and Go's trim markers `{{- ` and ` -}}`
 * Anything else is a TemplateError naming the file and line, raised when the template is
 * parsed (at start-up), never while a mail is sent. A variable is one of `variables`
 * (`Data` takes any path below it: the user's user_metadata); a missing value renders as
 * nothing, an object as JSON.
 */

export class TemplateError extends Error {
  readonly file: string;
  readonly line: number;
  constructor(file: string, line: number, what: string) {
    super(line > 0 ? `${file}:${line}: ${what}` : `${file}: ${what}`);
    this.name = 'TemplateError';
    this.file = file;
    this.line = line;
  }
}

type Cond =
  | { op: 'truthy' | 'not'; path: string[] }
  | { op: 'eq' | 'ne'; path: string[]; value: string };

type Node =
  | { t: 'text'; s: string }
  | { t: 'var'; path: string[] }
  | { t: 'if'; cond: Cond; then: Node[]; else: Node[] };

export interface Template {
  readonly file: string;
  readonly nodes: readonly Node[];
}

const ACTION = /\{\{(-\s)?\s*([\s\S]*?)\s*(\s-)?\}\}/g;
const PATH = /^\.[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;
const STRING = /^"((?:[^"\\]|\\.)*)"$/;

interface Frame {
  cond: Cond | null;
  then: Node[];
  else: Node[] | null;
  line: number;
  /** `else if` opened this frame: its `end` closes the enclosing one too. */
  chained: boolean;
}

/** Parse `source` (named `file` in errors); every variable must be in `variables`. */
export function parse(source: string, file: string, variables: ReadonlySet<string>): Template {
  const lineAt = (i: number) => source.slice(0, i).split('\n').length;
  const root: Node[] = [];
  const stack: Frame[] = [];
  const out = () => {
    const f = stack.at(-1);
    return f === undefined ? root : (f.else ?? f.then);
  };
  const path = (expr: string, line: number): string[] => {
    if (!PATH.test(expr)) throw new TemplateError(file, line, `unsupported expression "${expr}" (a variable is written .Name)`);
    const p = expr.slice(1).split('.');
    if (!variables.has(p[0])) throw new TemplateError(file, line, `unknown variable .${p[0]} (known: ${[...variables].map((v) => '.' + v).join(', ')})`);
    if (p.length > 1 && p[0] !== 'Data') throw new TemplateError(file, line, `.${p[0]} has no fields (only .Data has)`);
    return p;
  };
  const cond = (expr: string, line: number): Cond => {
    const m = /^(not|eq|ne)\s+(\S+)(?:\s+(.+))?$/.exec(expr);
    if (m === null) return { op: 'truthy', path: path(expr, line) };
    if (m[1] === 'not') {
      if (m[3] !== undefined) throw new TemplateError(file, line, `not takes one variable: "${expr}"`);
      return { op: 'not', path: path(m[2], line) };
    }
    const s = m[3] === undefined ? null : STRING.exec(m[3].trim());
    if (s === null) throw new TemplateError(file, line, `${m[1]} takes a variable and a "string": "${expr}"`);
    return { op: m[1] as 'eq' | 'ne', path: path(m[2], line), value: JSON.parse(`"${s[1]}"`) as string };
  };
  let last = 0;
  let trimNext = false;
  for (const m of source.matchAll(ACTION)) {
    const line = lineAt(m.index);
    let text = source.slice(last, m.index);
    if (trimNext) text = text.replace(/^\s+/, '');
    if (m[1] !== undefined) text = text.replace(/\s+$/, '');
    if (text.includes('{{')) throw new TemplateError(file, lineAt(last + text.indexOf('{{')), 'unclosed {{');
    if (text !== '') out().push({ t: 'text', s: text });
    last = m.index + m[0].length;
    trimNext = m[3] !== undefined;
    const expr = m[2].trim();
    if (/^\/\*[\s\S]*\*\/$/.test(expr)) continue;
    if (expr === '') throw new TemplateError(file, line, 'empty action {{ }}');
    const [word, ...rest] = expr.split(/\s+/);
    const arg = expr.slice(word.length).trim();
    if (word === 'if') {
      if (arg === '') throw new TemplateError(file, line, 'if without a condition');
      stack.push({ cond: cond(arg, line), then: [], else: null, line, chained: false });
    } else if (word === 'else') {
      const f = stack.at(-1);
      if (f === undefined || f.else !== null) throw new TemplateError(file, line, '{{ else }} without its {{ if }}');
      f.else = [];
      if (rest[0] === 'if') {
        const inner = arg.slice(2).trim();
        if (inner === '') throw new TemplateError(file, line, 'else if without a condition');
        stack.push({ cond: cond(inner, line), then: [], else: null, line, chained: true });
      } else if (arg !== '') {
        throw new TemplateError(file, line, `unsupported action "{{ ${expr} }}"`);
      }
    } else if (word === 'end') {
      if (arg !== '') throw new TemplateError(file, line, `unsupported action "{{ ${expr} }}"`);
      let f: Frame | undefined;
      do {
        f = stack.pop();
        if (f === undefined) throw new TemplateError(file, line, '{{ end }} without its {{ if }}');
        out().push({ t: 'if', cond: f.cond!, then: f.then, else: f.else ?? [] });
      } while (f.chained);
    } else if (word.startsWith('.') && rest.length === 0) {
      out().push({ t: 'var', path: path(word, line) });
    } else {
      throw new TemplateError(file, line, `unsupported action "{{ ${expr} }}" (variables, if, else and end only)`);
    }
  }
  let tail = source.slice(last);
  if (trimNext) tail = tail.replace(/^\s+/, '');
  if (tail.includes('{{')) throw new TemplateError(file, lineAt(last + tail.indexOf('{{')), 'unclosed {{');
  if (stack.length > 0) throw new TemplateError(file, stack[0].line, '{{ if }} without its {{ end }}');
  if (tail !== '') root.push({ t: 'text', s: tail });
  return { file, nodes: root };
}

function lookup(data: Record<string, unknown>, path: readonly string[]): unknown {
  let v: unknown = data;
  for (const k of path) {
    if (typeof v !== 'object' || v === null || Array.isArray(v) || !Object.hasOwn(v, k)) return undefined;
    v = (v as Record<string, unknown>)[k];
  }
  return v;
}

function truthy(v: unknown): boolean {
  if (v === undefined || v === null || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}

function str(v: unknown): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return JSON.stringify(v);
}

function test(c: Cond, data: Record<string, unknown>): boolean {
  const v = lookup(data, c.path);
  switch (c.op) {
    case 'truthy':
      return truthy(v);
    case 'not':
      return !truthy(v);
    case 'eq':
      return str(v) === c.value;
    case 'ne':
      return str(v) !== c.value;
  }
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&#34;', "'": '&#39;' })[c]!);
}

/** Render with `data`; `html`: values are escaped (the template's own text never is). */
export function render(tpl: Template, data: Record<string, unknown>, html: boolean): string {
  const walk = (nodes: readonly Node[]): string => {
    let s = '';
    for (const n of nodes) {
      if (n.t === 'text') s += n.s;
      else if (n.t === 'var') s += html ? escapeHtml(str(lookup(data, n.path))) : str(lookup(data, n.path));
      else s += walk(test(n.cond, data) ? n.then : n.else);
    }
    return s;
  };
  return walk(tpl.nodes);
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };

export function decodeEntities(s: string): string {
  return s.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (all, e: string) => {
    if (e[0] === '#') {
      const n = e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
      return n > 0 && n <= 0x10ffff ? String.fromCodePoint(n) : all;
    }
    return ENTITIES[e.toLowerCase()] ?? all;
  });
}

/**
 * The text part of a rendered HTML mail: tags dropped, a link written `label: URL` (or the
 * URL alone when the label is the URL), blocks on their own lines, entities decoded.
 */
export function htmlToText(html: string): string {
  let s = html
    .replace(/<!--[\s\S]*?-->/g, '')
    .replace(/<(head|style|script|title)\b[\s\S]*?<\/\1\s*>/gi, '')
    .replace(/<a\b[^>]*?\bhref\s*=\s*("([^"]*)"|'([^']*)')[^>]*>([\s\S]*?)<\/a\s*>/gi, (_all, _q, dq: string | undefined, sq: string | undefined, label: string) => {
      // Still encoded: the whole text is decoded once, below.
      const url = (dq ?? sq ?? '').trim();
      const text = label.replace(/<[^>]*>/g, '').replace(/\s+/g, ' ').trim();
      return text === '' || decodeEntities(text) === decodeEntities(url) ? url : `${text}: ${url}`;
    })
    .replace(/<br\s*\/?>/gi, '\n')
    .replace(/<li\b[^>]*>/gi, '\n- ')
    .replace(/<\/(p|div|h[1-6]|li|tr|table|ul|ol|blockquote)\s*>/gi, '\n\n')
    .replace(/<(p|div|h[1-6]|tr|table|ul|ol|blockquote)\b[^>]*>/gi, '\n\n')
    .replace(/<[^>]*>/g, '');
  s = decodeEntities(s)
    .split('\n')
    .map((l) => l.replace(/[ \t\r\f\v]+/g, ' ').trim())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
  return s + '\n';
}
