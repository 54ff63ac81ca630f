/**
 * The email template engine (GoTrue's Go-template subset) and the folder loader: variables,
 * conditions, escaping, the text made from HTML, the locale fallback, the subject, and the
 * errors that stop the start with a file and a line.
 */
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { htmlToText, parse, render, TemplateError } from '../../src/auth/templates/engine.ts';
import { VARIABLES } from '../../src/auth/templates/defaults.ts';
import { loadTemplates, localesOf } from '../../src/auth/templates/index.ts';

const tpl = (s: string) => parse(s, 'x.html', VARIABLES);

t.test('variables: GoTrue names, .Data paths, missing values empty', async (t) => {
  const data = { Email: 'ada@example.com', Data: { name: 'Ada', address: { city: 'Paris' }, n: 3 } };
  t.equal(render(tpl('Hi {{ .Data.name }} <{{.Email}}> {{ .Data.address.city }} {{ .Data.n }}'), data, false), 'Hi Ada <ada@example.com> Paris 3');
  t.equal(render(tpl('[{{ .Data.nothing }}][{{ .Token }}][{{ .Data.name.x }}]'), data, false), '[][][]');
  t.equal(render(tpl('{{ .Data.address }}'), data, false), '{"city":"Paris"}');
});

t.test('escaping: values in HTML, never the template text; text unescaped', async (t) => {
  const hostile = { Data: { name: '<script>alert("x")</script> & \'co\'' } };
  const html = render(tpl('<b>{{ .Data.name }}</b>'), hostile, true);
  t.equal(html, '<b>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &#39;co&#39;</b>');
  t.equal(render(tpl('{{ .Data.name }}'), hostile, false), '<script>alert("x")</script> & \'co\'');
});

t.test('conditions: if, else if, else, not, eq, ne; trim markers; comments', async (t) => {
  const src = '{{ if .Token }}code {{ .Token }}{{ else if eq .Data.plan "gold" }}gold{{ else }}none{{ end }}';
  t.equal(render(tpl(src), { Token: '123456' }, false), 'code 123456');
  t.equal(render(tpl(src), { Data: { plan: 'gold' } }, false), 'gold');
  t.equal(render(tpl(src), { Data: { plan: 'free' } }, false), 'none');
  t.equal(render(tpl('{{ if not .Data.x }}no x{{ end }}{{ if ne .Data.x "a" }}!{{ end }}'), { Data: {} }, false), 'no x!');
  t.equal(render(tpl('{{ if .Data.list }}some{{ end }}{{ if .Data.obj }}obj{{ end }}'), { Data: { list: [], obj: {} } }, false), '', 'empty list and map are false, as in Go');
  t.equal(render(tpl('a  {{- .Email -}}  b{{/* a note */}}'), { Email: 'E' }, false), 'aEb');
  t.equal(render(tpl('{{ if .Email }}{{ if .Token }}both{{ else }}email{{ end }}{{ end }}'), { Email: 'e' }, false), 'email', 'nested');
});

t.test('errors name the file and the line', async (t) => {
  const cases: [string, RegExp][] = [
    ['line 1\n<a href="{{ .ConfirmationUrl }}">', /^x\.html:2: unknown variable \.ConfirmationUrl \(known: .*\.ConfirmationURL/],
    ['\n\n{{ if .Token }}open', /^x\.html:3: \{\{ if \}\} without its \{\{ end \}\}/],
    ['{{ end }}', /^x\.html:1: \{\{ end \}\} without its \{\{ if \}\}/],
    ['{{ else }}', /^x\.html:1: \{\{ else \}\} without its \{\{ if \}\}/],
    ['a\n{{ range .Data }}{{ end }}', /^x\.html:2: unsupported action "\{\{ range \.Data \}\}"/],
    ['{{ .Email | upper }}', /^x\.html:1: unsupported action/],
    ['{{ .Email.domain }}', /^x\.html:1: \.Email has no fields/],
    ['ok\n\nthen {{ .Email', /^x\.html:3: unclosed \{\{/],
    ['{{ eq .Email }}', /^x\.html:1: unsupported action/],
    ['{{ if eq .Email gold }}{{ end }}', /^x\.html:1: eq takes a variable and a "string"/],
    ['{{ }}', /^x\.html:1: empty action/],
  ];
  for (const [src, re] of cases) {
    const err = (() => {
      try {
        tpl(src);
      } catch (e) {
        return e;
      }
      return null;
    })();
    t.ok(err instanceof TemplateError, `${JSON.stringify(src)} is refused`);
    t.match((err as Error).message, re);
  }
});

t.test('the text part made from HTML: links with their URL, blocks on lines, entities decoded', async (t) => {
  const text = htmlToText(
    '<html><head><title>T</title><style>p{}</style></head><body><h2>Hello &amp; welcome</h2>\n' +
      '<p>Follow   the link:</p><p><a href="https://x.example/v?a=1&amp;b=2">Sign in</a></p>' +
      '<p><a href="https://x.example/raw">https://x.example/raw</a><br>bye &lt;3</p></body></html>',
  );
  t.equal(text, 'Hello & welcome\n\nFollow the link:\n\nSign in: https://x.example/v?a=1&b=2\n\nhttps://x.example/raw\nbye <3\n');
});

t.test('localesOf: the account\'s locale alone, else Accept-Language by quality', async (t) => {
  t.same(localesOf('pt_BR', 'fr-CA,fr;q=0.9'), ['pt-BR']);
  t.same(localesOf('', 'fr-CA,fr;q=0.9,*;q=0.5,en;q=0.8,de;q=0'), ['fr-CA', 'fr', 'en']);
  t.same(localesOf(undefined, null), []);
  t.same(localesOf({ not: 'a string' }, 'x y, es'), ['es'], 'junk is left out');
});

function folder(t: { teardown(fn: () => unknown): void }, files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-tpl-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const [name, body] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), body);
  }
  return dir;
}

t.test('the folder: locale, then its language, then the default language, then plinth\'s own', async (t) => {
  const dir = folder(t, {
    'magic_link.html': 'Subject: Sign in, {{ .Data.name }}\n<p><a href="{{ .ConfirmationURL }}">Sign in</a></p>\n',
    'fr/magic_link.html': 'Subject: Connexion, {{ .Data.name }}\n<p>Bonjour {{ .Data.name }}</p>\n<p><a href="{{ .ConfirmationURL }}">Se connecter</a></p>\n',
    'fr/magic_link.txt': 'Subject: ignored: the HTML has one\nBonjour {{ .Data.name }}, {{ .ConfirmationURL }}\n',
    'pt-BR/recovery.html': '<html><head><title>Redefinir a senha de {{ .Email }}</title></head><body><a href="{{ .ConfirmationURL }}">ok</a></body></html>',
    'README.md': 'not a template: ignored',
  });
  const m = loadTemplates(dir, true);
  const data = { ConfirmationURL: 'https://a.example/v?token=t&x=1', Email: 'e@example.com', Data: { name: 'Zoé <b>' } };
  const fr = m.render('magic_link', ['fr-CA', 'en'], data);
  t.equal(fr.locale, 'fr', 'fr-CA falls back to fr');
  t.equal(fr.subject, 'Connexion, Zoé <b>', 'the subject line, a template, unescaped');
  t.equal(fr.html, '<p>Bonjour Zoé &lt;b&gt;</p>\n<p><a href="https://a.example/v?token=t&amp;x=1">Se connecter</a></p>\n');
  t.equal(fr.text, 'Bonjour Zoé <b>, https://a.example/v?token=t&x=1\n', 'the .txt beside the HTML');
  const de = m.render('magic_link', ['de'], data);
  t.equal(de.locale, '', 'no de folder: the default language');
  t.equal(de.subject, 'Sign in, Zoé <b>');
  t.equal(de.text, 'Sign in: https://a.example/v?token=t&x=1\n', 'no .txt: the HTML made text');
  const pt = m.render('recovery', ['pt-br'], data);
  t.equal(pt.subject, 'Redefinir a senha de e@example.com', 'the <title> when there is no subject line');
  t.equal(pt.locale, 'pt-br');
  const own = m.render('recovery', ['de'], data);
  t.equal(own.locale, null, 'a kind the folder lacks: plinth\'s own');
  t.equal(own.subject, 'Reset your password');
  t.match(own.html, /<a href="https:\/\/a\.example\/v\?token=t&amp;x=1">/);
});

t.test('folder errors stop the load with the file (and line)', async (t) => {
  const bad = folder(t, { 'fr/magic_link.html': '<p>\n<a href="{{ .ConfirmationUrl }}">x</a>\n' });
  t.throws(() => loadTemplates(bad, true), { name: 'TemplateError', message: `${join(bad, 'fr', 'magic_link.html')}:2: unknown variable .ConfirmationUrl` + ' (known: .ConfirmationURL, .Token, .TokenHash, .SiteURL, .Email, .NewEmail, .OldEmail, .Data, .RedirectTo, .SendingTo, .EmailChanged, .PasswordChanged)' });
  const subject = folder(t, { 'invite.html': 'Subject: {{ .Nope }}\n<p>x</p>' });
  t.throws(() => loadTemplates(subject, true), { message: `${join(subject, 'invite.html')}:1: unknown variable .Nope` + ' (known: .ConfirmationURL, .Token, .TokenHash, .SiteURL, .Email, .NewEmail, .OldEmail, .Data, .RedirectTo, .SendingTo, .EmailChanged, .PasswordChanged)' });
  const kind = folder(t, { 'magiclink.html': '<p>x</p>' });
  t.throws(() => loadTemplates(kind, true), { message: `${join(kind, 'magiclink.html')}: unknown kind "magiclink" (kinds: confirmation, recovery, magic_link, email_change, invite, reauthentication, email_changed_notification, password_changed_notification)` });
  const locale = folder(t, { 'french stuff/magic_link.html': '<p>x</p>' });
  t.throws(() => loadTemplates(locale, true), { message: /french stuff: is not a locale folder/ });
  const unreadable = folder(t, {});
  symlinkSync(join(unreadable, 'nowhere.html'), join(unreadable, 'recovery.html'));
  t.throws(() => loadTemplates(unreadable, true), { message: `${join(unreadable, 'recovery.html')}: cannot be read (ENOENT)` });
  t.throws(() => loadTemplates(join(unreadable, 'missing'), true), { message: /missing: cannot be read \(ENOENT\)/ }, 'a folder named by AUTH_TEMPLATES_DIR must exist');
  t.equal(loadTemplates(join(unreadable, 'missing'), false).render('invite', [], {}).locale, null, 'the default folder may be absent');
});

t.test('plinth\'s own mails: one link, and the code beside it when there is one', async (t) => {
  const { composeEmail } = await import('../../src/auth/mail.ts');
  const config = { apiExternalUrl: 'https://api.example.org', siteUrl: 'https://app.example.org' };
  const plain = composeEmail(config, 'magic_link', 'tok');
  t.equal(plain.text, 'Sign in by opening this link:\n\nhttps://api.example.org/auth/v1/magiclink/verify?token=tok\n\nThe link is valid for 1 hour and works once. If you did not ask for it, you can ignore this email.\n');
  const coded = composeEmail(config, 'magic_link', 'tok', '123456');
  t.equal(coded.token, '123456');
  t.match(coded.text, /\n\nOr enter this code: 123456\n\nThe link and the code are valid for 1 hour and work once\./);
});
