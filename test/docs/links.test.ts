/**
 * The documentation stands on its own: every relative link in README.md and docs/**\/*.md
 * resolves to a file inside the repository (and its anchor, if it has one, to a heading of
 * that file, as GitHub names headings), and nothing points at documents a reader of the
 * repository does not have (`../shared`, an interface's numbered sections).
 */
import t from 'tap';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function markdownFiles(): string[] {
  const out = [join(ROOT, 'README.md')];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (name.endsWith('.md')) out.push(p);
    }
  };
  if (existsSync(join(ROOT, 'docs'))) walk(join(ROOT, 'docs'));
  return out;
}

/** The text outside fenced code blocks, line by line (code is not a link or a heading). */
export function proseLines(markdown: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  let fenced = false;
  markdown.split('\n').forEach((text, i) => {
    if (/^```/.test(text)) {
      fenced = !fenced;
      return;
    }
    if (!fenced) out.push({ line: i + 1, text });
  });
  return out;
}

/** GitHub's anchor for a heading's text: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  const text = heading
    .replace(/`([^`]*)`/g, '$1')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

/** The anchors of a Markdown file's headings, with GitHub's -1, -2 … for repeats. */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const { text } of proseLines(markdown)) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text);
    if (!m) continue;
    const base = slug(m[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Inline links `[text](target)` and reference definitions `[x]: target`, outside code. */
export function links(markdown: string): { line: number; target: string }[] {
  const out: { line: number; target: string }[] = [];
  for (const { line, text } of proseLines(markdown)) {
    const prose = text.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ line, target: m[1] });
    const def = /^\s*\[[^\]]+\]:\s*<?(\S+?)>?(\s|$)/.exec(prose);
    if (def) out.push({ line, target: def[1] });
  }
  return out;
}

const files = markdownFiles();

t.test('the documentation has its pages', async (t) => {
  for (const page of [
    'docs/getting-started.md',
    'docs/client.md',
    'docs/operations.md',
    'docs/architecture.md',
    'docs/performance.md',
    'docs/dependencies.md',
    'docs/api/overview.md',
    'docs/api/auth.md',
    'docs/api/rest.md',
    'docs/api/storage.md',
    'docs/api/functions.md',
    'docs/api/live.md',
    'docs/api/webhooks.md',
  ]) {
    t.ok(files.includes(join(ROOT, page)), page);
  }
  t.ok(files.filter((f) => f.includes(`${sep}docs${sep}decisions${sep}`)).length > 10, 'docs/decisions/ holds the decisions, one a file');
});

t.test('every relative link resolves inside the repository', async (t) => {
  let checked = 0;
  for (const file of files) {
    const name = relative(ROOT, file);
    const markdown = readFileSync(file, 'utf8');
    for (const { line, target } of links(markdown)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: …: not in the repository
      checked++;
      const hash = target.indexOf('#');
      const pathPart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
      const anchor = hash < 0 ? null : target.slice(hash + 1);
      const dest = pathPart === '' ? file : resolve(dirname(file), pathPart);
      const where = `${name}:${line} → ${target}`;
      if (relative(ROOT, dest).startsWith('..')) {
        t.fail(`${where}: leaves the repository`);
        continue;
      }
      if (!existsSync(dest)) {
        t.fail(`${where}: no such file`);
        continue;
      }
      if (anchor !== null) {
        if (!dest.endsWith('.md') || statSync(dest).isDirectory()) {
          t.fail(`${where}: an anchor into a file that is not Markdown`);
          continue;
        }
        const heads = anchors(readFileSync(dest, 'utf8'));
        if (!heads.has(anchor)) t.fail(`${where}: no heading #${anchor} in ${relative(ROOT, dest)}`);
      }
    }
  }
  t.ok(checked > 50, `relative links were checked (${checked})`);
});

t.test('nothing points outside the repository', async (t) => {
  for (const file of files) {
    const name = relative(ROOT, file);
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((text, i) => {
        if (/\.\.\/shared\b|shared\/spec|http-interface\.md|contract\.md|design\.md|renovation\.md/.test(text)) {
          t.fail(`${name}:${i + 1}: points at a document that is not in the repository`, { text });
        }
        if (text.includes('§')) t.fail(`${name}:${i + 1}: cites a numbered section of a document that is not in the repository`, { text });
        if (/\bissues?\s+#?\d+/i.test(text)) t.fail(`${name}:${i + 1}: cites an issue number (history belongs in git)`, { text });
      });
  }
});

t.test('the link checker itself', async (t) => {
  t.equal(slug('POST /auth/v1/signup'), 'post-authv1signup');
  t.equal(slug('Sign-up and `sign-in`'), 'sign-up-and-sign-in');
  t.equal(slug('Login roles, for a DBA'), 'login-roles-for-a-dba');
  t.same([...anchors('# A\n## A\n```\n# not a heading\n```\n')], ['a', 'a-1']);
  t.same(
    links('see [x](a.md#b) and `[y](ignored.md)`\n```\n[z](code.md)\n```\n[ref]: ./c.md\n').map((l) => l.target),
    ['a.md#b', './c.md'],
  );
});
