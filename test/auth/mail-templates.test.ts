/**
 * The app's email templates end to end (docs/emails.md), with a real SMTP receiver: a
 * Supabase-style HTML template in the account's locale (user_metadata.locale) or the
 * request's Accept-Language, the fallback to the default language and to plinth's own,
 * a hostile user_metadata value escaped in HTML and plain in text, the subject from the
 * file, both SUPABASE_COMPAT modes, and a broken template stopping the start.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TEST_JWT_SECRET } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { PASSWORD, linksOf, startAuthApp, startSmtp, tokenOfLink, uniqueEmail } from './helpers.ts';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));

function templates(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-mail-tpl-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const [name, body] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), body);
  }
  return dir;
}

// Supabase's dashboard defaults, pasted with their subject on a first line, and a French set.
const DIR = templates({
  'confirmation.html': 'Subject: Confirm Your Signup\n<h2>Confirm your signup</h2>\n\n<p>Follow this link to confirm your user:</p>\n<p><a href="{{ .ConfirmationURL }}">Confirm your mail</a></p>\n',
  'magic_link.html': 'Subject: Your Magic Link\n<h2>Magic Link</h2>\n\n<p>Follow this link to login:</p>\n<p><a href="{{ .ConfirmationURL }}">Log In</a></p>\n',
  'fr/confirmation.html':
    'Subject: Bienvenue {{ .Data.name }} : confirmez votre adresse\n<h2>Bonjour {{ .Data.name }}</h2>\n' +
    '<p>Confirmez {{ .Email }} en suivant ce lien :</p>\n<p><a href="{{ .ConfirmationURL }}">Confirmer mon adresse</a></p>\n' +
    '{{ if .Token }}<p>Ou saisissez ce code : {{ .Token }}</p>{{ end }}\n',
  'fr/magic_link.html':
    'Subject: Votre lien de connexion\n<h2>Bonjour {{ .Data.name }}</h2>\n<p><a href="{{ .ConfirmationURL }}">Se connecter</a></p>\n' +
    '{{ if .Token }}<p>Code : {{ .Token }}</p>{{ end }}\n',
  'fr/magic_link.txt': 'Subject: (the HTML\'s subject wins)\nBonjour {{ .Data.name }}, connectez-vous : {{ .ConfirmationURL }}\n{{ if .Token }}Code : {{ .Token }}\n{{ end }}',
});

const HOSTILE = '<img src=x onerror="alert(1)">&co';

t.test('the interface\'s mails from the app\'s templates', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startAuthApp(t, {
    env: { SMTP_URL: smtp.url, SITE_URL: 'https://app.plinth.test', API_EXTERNAL_URL: 'https://api.plinth.test', REQUIRE_EMAIL_VERIFICATION: 'true', AUTH_TEMPLATES_DIR: DIR },
  });

  t.test('user_metadata.locale: French, the hostile name escaped in HTML and plain in the text part', async (t) => {
    const email = uniqueEmail('fr');
    const r = await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD, data: { locale: 'fr', name: HOSTILE } } });
    t.equal(r.status, 200);
    const mail = await smtp.next(email);
    t.equal(mail.subject, `Bienvenue ${HOSTILE} : confirmez votre adresse`, 'the subject from the file, with its variable');
    t.ok(mail.html, 'an HTML part');
    t.match(mail.html!, '<h2>Bonjour &lt;img src=x onerror=&#34;alert(1)&#34;&gt;&amp;co</h2>');
    t.notMatch(mail.html!, '<img', 'no markup from the user reaches the HTML');
    t.match(mail.html!, `<p>Confirmez ${email} en suivant ce lien :</p>`);
    t.notMatch(mail.html!, 'saisissez', 'no code in this mail: the {{ if .Token }} block is left out');
    t.match(mail.text, `Bonjour ${HOSTILE}`, 'the text part (made from the HTML) is plain');
    const links = linksOf(mail.text);
    t.equal(links.length, 1, 'one link in the text part');
    t.match(links[0], /^https:\/\/api\.plinth\.test\/auth\/v1\/verify\?token=[A-Za-z0-9_-]+$/);
    t.match(mail.html!, `href="${links[0]}"`);
    const v = await app.call('GET', new URL(links[0]).pathname + new URL(links[0]).search);
    t.same(v.body, { message: 'email verified' }, 'the link of the template works');

    const ml = await app.call('POST', '/auth/v1/magiclink', { body: { email } });
    t.equal(ml.status, 200);
    const m2 = await smtp.next(email);
    t.equal(m2.subject, 'Votre lien de connexion', 'the account\'s locale, read when the mail goes');
    const code = /\nCode : (\d{6})\n$/.exec(m2.text)?.[1];
    t.ok(code, 'the magic link\'s 6-digit code in the text part');
    t.equal(m2.text, `Bonjour ${HOSTILE}, connectez-vous : ${linksOf(m2.text)[0]}\nCode : ${code}\n`, 'the .txt beside the HTML, unescaped');
    t.match(linksOf(m2.text)[0], /^https:\/\/api\.plinth\.test\/auth\/v1\/magiclink\/verify\?token=/);
    t.match(m2.html!, 'Se connecter');

    t.equal((await app.call('POST', '/auth/v1/recover', { body: { email } })).status, 200);
    const m3 = await smtp.next(email);
    t.equal(m3.subject, 'Reset your password', 'a kind the folder lacks: plinth\'s own mail');
    t.match(m3.html!, /<a href="https:\/\/app\.plinth\.test\/reset-password\?token=[A-Za-z0-9_-]+">/);
    t.equal(linksOf(m3.text).length, 1);
  });

  t.test('Accept-Language when the account names no locale; else the default language', async (t) => {
    const fr = uniqueEmail('al');
    await app.call('POST', '/auth/v1/signup', { body: { email: fr, password: PASSWORD, data: { name: 'Zoé' } }, headers: { 'accept-language': 'fr-CA,fr;q=0.9,en;q=0.5' } });
    const m = await smtp.next(fr);
    t.equal(m.subject, 'Bienvenue Zoé : confirmez votre adresse', 'fr-CA found no folder, fr did');
    const de = uniqueEmail('de');
    await app.call('POST', '/auth/v1/signup', { body: { email: de, password: PASSWORD }, headers: { 'accept-language': 'de-DE,de;q=0.9' } });
    const d = await smtp.next(de);
    t.equal(d.subject, 'Confirm Your Signup', 'no de folder: the folder\'s default language');
    t.match(d.html!, '<p><a href="https://api.plinth.test/auth/v1/verify?token=');
    t.equal(d.text, `Confirm your signup\n\nFollow this link to confirm your user:\n\nConfirm your mail: ${linksOf(d.text)[0]}\n`, 'text made from the HTML');
    const own = uniqueEmail('own');
    await app.call('POST', '/auth/v1/signup', { body: { email: own, password: PASSWORD, data: { locale: 'en' } }, headers: { 'accept-language': 'fr' } });
    t.equal((await smtp.next(own)).subject, 'Confirm Your Signup', 'the account\'s locale comes before Accept-Language');
  });
});

t.test('SUPABASE_COMPAT: GoTrue\'s link and the 6-digit code as {{ .Token }}, TokenHash usable with verify', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startAuthApp(t, {
    env: { SMTP_URL: smtp.url, SITE_URL: 'https://app.plinth.test', API_EXTERNAL_URL: 'https://api.plinth.test', SUPABASE_COMPAT: 'true', AUTH_TEMPLATES_DIR: DIR },
  });
  const email = uniqueEmail('compat');
  const r = await app.call('POST', '/auth/v1/otp', { apikey: app.anonKey, body: { email, data: { locale: 'fr', name: 'Zoé' } } });
  t.equal(r.status, 200);
  const signup = await smtp.next(email);
  t.equal(signup.subject, 'Bienvenue Zoé : confirmez votre adresse', 'a new account: the confirmation template');
  const code = /Ou saisissez ce code : (\d{6})/.exec(signup.html!)?.[1];
  t.ok(code, 'the code in the HTML');
  const link = new URL(/href="([^"]+)"/.exec(signup.html!)![1].replace(/&amp;/g, '&'));
  t.equal(link.origin + link.pathname, 'https://api.plinth.test/auth/v1/verify', 'GoTrue\'s verify link');
  t.equal(link.searchParams.get('type'), 'signup');
  const v = await app.call('POST', '/auth/v1/verify', { apikey: app.anonKey, body: { type: 'email', email, token: code } });
  t.equal(v.status, 200, 'the code of the template signs in');
  t.type((v.body as { access_token: unknown }).access_token, 'string');

  t.equal((await app.call('POST', '/auth/v1/otp', { apikey: app.anonKey, body: { email } })).status, 200);
  const ml = await smtp.next(email);
  t.equal(ml.subject, 'Votre lien de connexion');
  t.match(ml.text, /^Bonjour Zoé, connectez-vous : https:\/\/api\.plinth\.test\/auth\/v1\/verify\?token=\S+&type=magiclink&redirect_to=\S+\nCode : \d{6}\n$/);
  const token = tokenOfLink(linksOf(ml.text)[0]);
  const byHash = await app.call('POST', '/auth/v1/verify', { apikey: app.anonKey, body: { type: 'magiclink', token_hash: token } });
  t.equal(byHash.status, 200, '{{ .TokenHash }} is what verify takes as token_hash');
});

t.test('a broken template stops the start, naming the file and the line', async (t) => {
  const broken = templates({ 'fr/magic_link.html': 'Subject: Lien\n<h2>Bonjour</h2>\n<a href="{{ .ConfirmationUrl }}">x</a>\n' });
  await t.rejects(startAuthApp(t, { env: { AUTH_TEMPLATES_DIR: broken } }), { name: 'TemplateError', message: new RegExp(`^${join(broken, 'fr', 'magic_link.html')}:3: unknown variable \\.ConfirmationUrl`) });
  await t.rejects(startAuthApp(t, { env: { AUTH_TEMPLATES_DIR: join(broken, 'absent') } }), { message: /absent: cannot be read \(ENOENT\)/ }, 'a folder that is named must exist');

  const db = await createTestDatabase(t);
  const dataDir = mkdtempSync(join(tmpdir(), 'plinth-mail-tpl-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH ?? '', DATABASE_URL: db.url, MIGRATE_ON_START: 'false', JWT_SECRET: TEST_JWT_SECRET, HOST: '127.0.0.1', PORT: '0',
      DATA_DIR: dataDir, DB_POOL_SIZE: '2', LOG_LEVEL: 'warn', AUTH_TEMPLATES_DIR: broken,
    },
  });
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  t.equal(code, 1, 'the process stops');
  t.match(err, `start failed: ${join(broken, 'fr', 'magic_link.html')}:3: unknown variable .ConfirmationUrl`);
});
