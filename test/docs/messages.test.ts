/**
 * The API reference names every message plinth can answer: each `{"error": …}` text built
 * in src/ (an AppError's message, literal, templated or a named constant, the HTTP shell's
 * own, the bundled Deno runtime's) and each success `message`, appears in docs/api/*.md.
 * A new message without its line in the reference fails here.
 */
import t from 'tap';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...tsFiles(p));
    else if (name.endsWith('.ts')) out.push(p);
  }
  return out;
}

interface Message {
  /** Where it was found. */
  where: string;
  /** The text, `${…}` parts standing for any text. */
  text: string;
}

/** Every message a client can receive, from the sources (client library excluded: it answers nothing). */
export function messages(files: { name: string; source: string }[]): Message[] {
  const all = files.map((f) => f.source).join('\n');
  const constant = (name: string): string | null => {
    const m = new RegExp(`\\b${name}\\s*[:=]\\s*'([^']*)'`).exec(all);
    return m ? m[1] : null;
  };
  const out: Message[] = [];
  for (const { name, source } of files) {
    const add = (text: string) => out.push({ where: name, text });
    // Constants are upper case (MSG.singular, INVALID_EMBED); a variable (err.publicMessage)
    // passes on a message made elsewhere (GrammarError's, below).
    for (const m of source.matchAll(/AppError\(\s*\d{3},\s*(?:'([^']*)'|`([^`]*)`|([A-Z_][\w.]*))/g)) {
      if (m[1] !== undefined) add(m[1]);
      else if (m[2] !== undefined) add(m[2].replace(/\$\{([A-Z_]+)\}/g, (x, c: string) => constant(c) ?? x));
      else {
        const text = constant(m[3].split('.').pop()!);
        if (text === null) throw new Error(`${name}: the message ${m[3]} is not a string constant found in src`);
        add(text);
      }
    }
    for (const m of source.matchAll(/new GrammarError\(([A-Z_]+)\)/g)) add(constant(m[1]) ?? m[1]);
    for (const m of source.matchAll(/\[\d{3}, '([^']+)'\]/g)) add(m[1]);
    if (name.endsWith('runtime/server.ts')) for (const m of source.matchAll(/\berror: '([^']+)'/g)) add(m[1]);
    for (const m of source.matchAll(/\.send\(\{ message: '([^']+)' \}\)/g)) add(m[1]);
    const block = /export const MESSAGES = \{([\s\S]*?)\}/.exec(source);
    if (block) for (const m of block[1].matchAll(/:\s*'([^']+)'/g)) add(m[1]);
  }
  return out;
}

/** Does the reference (whitespace folded) hold the message, `${…}` matching any text? */
export function documented(reference: string, text: string): boolean {
  const parts = text.split(/\$\{[^}]*\}/).map((p) => p.replace(/\s+/g, ' ').replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(parts.join('.+?')).test(reference);
}

t.test('every message is in the API reference', async (t) => {
  const files = tsFiles(join(ROOT, 'src'))
    .filter((f) => !f.includes(`${join('src', 'client')}`))
    .map((f) => ({ name: relative(ROOT, f), source: readFileSync(f, 'utf8') }));
  const dir = join(ROOT, 'docs/api');
  const reference = readdirSync(dir)
    .filter((n) => n.endsWith('.md'))
    .map((n) => readFileSync(join(dir, n), 'utf8'))
    .join('\n')
    .replace(/\s+/g, ' ');
  const found = messages(files);
  t.ok(found.length > 70, `messages found in src (${found.length})`);
  const seen = new Set<string>();
  for (const m of found) {
    if (seen.has(m.text)) continue;
    seen.add(m.text);
    t.ok(documented(reference, m.text), `"${m.text}" (${m.where}) is in docs/api`);
  }
});

t.test('the message finder itself', async (t) => {
  const src = [
    { name: 'a.ts', source: "const X = 'named one';\nnew AppError(400, 'plain one');\nnew AppError(409, `took ${id} twice`);\nnew AppError(404, MSG.X);" },
  ];
  t.same(messages(src).map((m) => m.text), ['plain one', 'took ${id} twice', 'named one']);
  t.ok(documented('answers 409 `took <id> twice` when', 'took ${id} twice'));
  t.notOk(documented('answers 409 `took twice`', 'took ${id} twice'));
});
