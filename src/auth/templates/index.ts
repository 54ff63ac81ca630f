/**
 * The app's email templates (docs/emails.md): AUTH_TEMPLATES_DIR holds `<kind>.html` and
 * `<kind>.txt` in the default language and `<locale>/<kind>.html|txt` per language. All
 * are read and parsed once, at start-up: a file that cannot be read, an unknown kind or
 * locale folder, a syntax error or an unknown variable stops the service with the file
 * and line. A mail is rendered in the first of its locales the folder has the kind for
 * (`fr-CA`, then `fr`), else the default language, else plinth's own (defaults.ts).
 *
 * A file may start with `Subject: …` (a template too; the line is not part of the body);
 * without it, an HTML file's `<title>` is the subject; without either, plinth's subject of
 * the kind. The text part is the `.txt` beside the `.html` chosen, else the HTML made text.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { decodeEntities, htmlToText, parse, render, TemplateError, type Template } from './engine.ts';
import { DEFAULTS, KINDS, VARIABLES, type TemplateKind } from './defaults.ts';

export { TemplateError } from './engine.ts';
export { KINDS, type TemplateKind } from './defaults.ts';

interface Parsed {
  subject: Template | null;
  body: Template;
}

interface KindSet {
  html?: Parsed;
  txt?: Parsed;
}

export interface RenderedMail {
  subject: string;
  /** null: the kind has only a `.txt` in the locale chosen, the mail is text only. */
  html: string | null;
  text: string;
  /** The locale folder used ('' the default language; null plinth's own). */
  locale: string | null;
}

export interface MailTemplates {
  render(kind: TemplateKind, locales: readonly string[], data: Record<string, unknown>): RenderedMail;
}

const LOCALE = /^[a-z]{2,3}(-[a-z0-9]{2,8})*$/;
const SUBJECT = /^\uFEFF?Subject:[ \t]*(.*?)\r?$/i;

function parseFile(source: string, file: string, isHtml: boolean): Parsed {
  const text = source.replace(/^\uFEFF/, '');
  const first = SUBJECT.exec(text.split('\n', 1)[0]);
  if (first !== null) {
    // The line is blanked, not cut: the body's line numbers stay the file's.
    return { subject: parse(first[1], file, VARIABLES), body: parse(text.slice(text.split('\n', 1)[0].length), file, VARIABLES) };
  }
  const title = isHtml ? /<title[^>]*>([\s\S]*?)<\/title\s*>/i.exec(text) : null;
  const before = title === null ? '' : '\n'.repeat(text.slice(0, title.index).split('\n').length - 1);
  return { subject: title === null ? null : parse(before + title[1].trim(), file, VARIABLES), body: parse(text, file, VARIABLES) };
}

function readKinds(dir: string, shown: string, into: Map<TemplateKind, KindSet>): string[] {
  const subdirs: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.name.startsWith('.')) continue;
    if (e.isDirectory()) {
      subdirs.push(e.name);
      continue;
    }
    const m = /^(.*)\.(html|txt)$/.exec(e.name);
    if (m === null) continue;
    const file = join(shown, e.name);
    if (!(KINDS as readonly string[]).includes(m[1])) {
      throw new TemplateError(file, 0, `unknown kind "${m[1]}" (kinds: ${KINDS.join(', ')})`);
    }
    let source: string;
    try {
      source = readFileSync(join(dir, e.name), 'utf8');
    } catch (err) {
      throw new TemplateError(file, 0, `cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
    }
    const set = into.get(m[1] as TemplateKind) ?? {};
    set[m[2] as 'html' | 'txt'] = parseFile(source, file, m[2] === 'html');
    into.set(m[1] as TemplateKind, set);
  }
  return subdirs;
}

const BUILT_IN: Map<TemplateKind, KindSet> = new Map(
  KINDS.map((k) => [k, { html: parseFile(DEFAULTS[k].html, `(built-in)/${k}.html`, true), txt: parseFile(DEFAULTS[k].txt, `(built-in)/${k}.txt`, false) }]),
);

/**
 * Read a folder of templates. `dir` null, or a missing folder when `required` is false: plinth's own only.
 * Throws TemplateError (file and line) for anything it cannot use.
 */
export function loadTemplates(dir: string | null, required = false): MailTemplates {
  const sets = new Map<string, Map<TemplateKind, KindSet>>();
  if (dir !== null && (required || existsSync(dir))) {
    let isDir: boolean;
    try {
      isDir = statSync(dir).isDirectory();
    } catch (err) {
      throw new TemplateError(dir, 0, `cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
    }
    if (!isDir) throw new TemplateError(dir, 0, 'is not a folder');
    const root = new Map<TemplateKind, KindSet>();
    sets.set('', root);
    for (const sub of readKinds(dir, dir, root)) {
      const key = sub.toLowerCase().replace(/_/g, '-');
      if (!LOCALE.test(key)) throw new TemplateError(join(dir, sub), 0, 'is not a locale folder (a language tag such as fr or pt-BR)');
      const set = new Map<TemplateKind, KindSet>();
      const nested = readKinds(join(dir, sub), join(dir, sub), set);
      if (nested.length > 0) throw new TemplateError(join(dir, sub, nested[0]), 0, 'locale folders hold files only');
      sets.set(key, set);
    }
  }
  const pick = (kind: TemplateKind, locales: readonly string[]): { set: KindSet; locale: string | null } => {
    for (const tag of locales) {
      const t = tag.toLowerCase();
      for (const key of [t, t.split('-')[0]]) {
        const set = sets.get(key)?.get(kind);
        if (set !== undefined && key !== '') return { set, locale: key };
      }
    }
    const root = sets.get('')?.get(kind);
    if (root !== undefined) return { set: root, locale: '' };
    return { set: BUILT_IN.get(kind)!, locale: null };
  };
  return {
    render(kind, locales, data) {
      const { set, locale } = pick(kind, locales);
      const html = set.html === undefined ? null : render(set.html.body, data, true).replace(/^\s*\n/, '');
      const text = set.txt !== undefined ? render(set.txt.body, data, false).replace(/^\s*\n/, '') : htmlToText(html ?? '');
      const subjectTpl = set.html?.subject ?? set.txt?.subject ?? BUILT_IN.get(kind)!.txt!.subject!;
      const subject = decodeEntities(render(subjectTpl, data, false)).replace(/\s+/g, ' ').trim();
      return { subject, html, text, locale };
    },
  };
}

/**
 * The locales to try for a mail, best first: the user's `user_metadata.locale` alone when
 * it names one (an account that says `en` gets the default language, not the browser's
 * French), else the request's Accept-Language by quality (`*` and q=0 left out).
 */
export function localesOf(userLocale: unknown, acceptLanguage: unknown): string[] {
  const out: string[] = [];
  const tag = /^[A-Za-z]{1,8}([-_][A-Za-z0-9]{1,8})*$/;
  if (typeof userLocale === 'string' && tag.test(userLocale.trim())) return [userLocale.trim().replace(/_/g, '-')];
  if (typeof acceptLanguage === 'string') {
    const ranked = acceptLanguage
      .slice(0, 500)
      .split(',')
      .map((part, i) => {
        const [t, ...params] = part.trim().split(';');
        const q = params.map((p) => /^\s*q=([0-9.]+)\s*$/.exec(p)).find((m) => m !== null);
        return { t: t.trim(), q: q ? Number(q[1]) : 1, i };
      })
      .filter((x) => x.t !== '*' && tag.test(x.t) && x.q > 0)
      .sort((a, b) => b.q - a.q || a.i - b.i);
    for (const x of ranked.slice(0, 10)) out.push(x.t);
  }
  return out;
}
