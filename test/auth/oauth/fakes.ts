/**
 * Fake OAuth providers on loopback ports, for the OAuth tests (issue 7):
 *
 * - `startOidcProvider`: a real OpenID provider (`oidc-provider`). As the `oidc` issuer it
 *   is discovered at its own loopback address; as google it signs with issuer
 *   `https://accounts.google.com`, as microsoft with `https://login.microsoftonline.com/<tid>/v2.0`,
 *   and the service reaches it through the endpoint overrides (contract §2). Its login and
 *   consent step is a tiny interaction route that signs in as `next` (or denies).
 * - `startGitHub`: a GitHub-shaped server: /login/oauth/authorize, /login/oauth/access_token
 *   (PKCE checked), /user, /user/emails.
 * - `startApple`: an Apple-shaped server: /auth/authorize answers the form_post page,
 *   /auth/token checks the ES256 client-secret JWT against the service's public key and
 *   returns an RS256 id_token, /auth/keys is the JWKS.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider, { type Configuration } from 'oidc-provider';
import { SignJWT, exportJWK, exportPKCS8, generateKeyPair, jwtVerify, type JWK } from 'jose';

interface TapLike {
  teardown(fn: () => unknown): void;
}

/** What the provider's login page does next. */
export type Login = { account: Record<string, unknown> } | { deny: true };

async function listen(t: TapLike, handler: http.RequestListener): Promise<{ server: http.Server; base: string }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function readBody(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function s256(verifier: string): string {
  return createHash('sha256').update(verifier).digest('base64url');
}

function escapeHtml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

export interface Client {
  clientId: string;
  clientSecret: string;
  redirectUri: string;
}

// ── oidc-provider ───────────────────────────────────────────────────────────────────────

export interface OidcProviderOptions extends Client {
  /** The issuer it signs as; default its own loopback address (discoverable). */
  issuer?: string;
  tokenEndpointAuthMethod?: 'client_secret_basic' | 'client_secret_post';
  /** true: the id_token carries only sub (the email comes from userinfo); false: scope claims in the id_token too. */
  conformIdTokenClaims?: boolean;
}

export interface OidcFake {
  base: string;
  issuer: string;
  authorizeUrl: string;
  tokenUrl: string;
  userinfoUrl: string;
  next: Login;
}

export async function startOidcProvider(t: TapLike, o: OidcProviderOptions): Promise<OidcFake> {
  const accounts = new Map<string, Record<string, unknown>>();
  let provider: Provider | null = null;
  const fake = {} as OidcFake;
  const { base } = await listen(t, (req, res) => {
    void (async () => {
      const p = provider as Provider;
      if (req.url?.startsWith('/interaction/')) {
        const details = await p.interactionDetails(req, res);
        const next = fake.next;
        if ('deny' in next) {
          await p.interactionFinished(req, res, { error: 'access_denied', error_description: 'the user said no' }, { mergeWithLastSubmission: false });
          return;
        }
        const accountId = randomUUID();
        accounts.set(accountId, next.account);
        const grant = new p.Grant({ accountId, clientId: String(details.params.client_id) });
        grant.addOIDCScope(String(details.params.scope));
        const grantId = await grant.save();
        await p.interactionFinished(req, res, { login: { accountId }, consent: { grantId } }, { mergeWithLastSubmission: false });
        return;
      }
      p.callback()(req, res);
    })().catch((err: unknown) => {
      res.writeHead(500).end(String(err));
    });
  });
  const issuer = o.issuer ?? base;
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const signingKey = { ...(await exportJWK(privateKey)), kid: 'fake-rs256', alg: 'RS256', use: 'sig' };
  const configuration: Configuration = {
    clients: [
      {
        client_id: o.clientId,
        client_secret: o.clientSecret,
        redirect_uris: [o.redirectUri],
        token_endpoint_auth_method: o.tokenEndpointAuthMethod ?? 'client_secret_basic',
      },
    ],
    jwks: { keys: [signingKey as never] },
    async findAccount(_ctx, id) {
      const claims = accounts.get(id);
      if (claims === undefined) return undefined;
      return { accountId: id, claims: () => ({ sub: id, ...claims }) };
    },
    claims: { openid: ['sub', 'tid', 'xms_edov'], email: ['email', 'email_verified'] },
    conformIdTokenClaims: o.conformIdTokenClaims ?? false,
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    cookies: { keys: [randomBytes(16).toString('hex')] },
    pkce: { required: () => true },
    ttl: { AccessToken: 600, AuthorizationCode: 60, IdToken: 600, Interaction: 600, Session: 600, Grant: 600 },
  };
  provider = new Provider(issuer, configuration);
  Object.assign(fake, {
    base,
    issuer,
    authorizeUrl: `${base}/auth`,
    tokenUrl: `${base}/token`,
    userinfoUrl: `${base}/me`,
    next: { deny: true },
  });
  return fake;
}

// ── GitHub ──────────────────────────────────────────────────────────────────────────────

export interface GitHubAccount {
  id: number;
  login: string;
  emails: { email: string; primary: boolean; verified: boolean; visibility?: string | null }[];
}

export interface GitHubFake {
  base: string;
  authorizeUrl: string;
  tokenUrl: string;
  userinfoUrl: string;
  next: { account: GitHubAccount } | { deny: true };
  /** The token endpoint answers GitHub's 200-with-error for the next exchange. */
  failNextToken: boolean;
  /** PKCE challenges seen at authorize. */
  challenges: string[];
}

export async function startGitHub(t: TapLike, c: Client): Promise<GitHubFake> {
  const codes = new Map<string, { account: GitHubAccount; redirectUri: string; challenge: string | null }>();
  const tokens = new Map<string, GitHubAccount>();
  const fake = { next: { deny: true }, failNextToken: false, challenges: [] as string[] } as unknown as GitHubFake;
  const { base } = await listen(t, (req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://github.test');
      if (req.method === 'GET' && url.pathname === '/login/oauth/authorize') {
        const q = url.searchParams;
        if (q.get('client_id') !== c.clientId || q.get('redirect_uri') !== c.redirectUri) return json(res, 400, { error: 'redirect_uri_mismatch' });
        const back = new URL(c.redirectUri);
        const next = fake.next;
        if ('deny' in next) {
          back.searchParams.set('error', 'access_denied');
          back.searchParams.set('error_description', 'The user has denied your application access.');
        } else {
          const code = randomBytes(10).toString('hex');
          const challenge = q.get('code_challenge_method') === 'S256' ? q.get('code_challenge') : null;
          if (challenge) fake.challenges.push(challenge);
          codes.set(code, { account: next.account, redirectUri: c.redirectUri, challenge });
          back.searchParams.set('code', code);
        }
        if (q.get('state') !== null) back.searchParams.set('state', q.get('state') as string);
        res.writeHead(302, { location: back.href }).end();
        return;
      }
      if (req.method === 'POST' && url.pathname === '/login/oauth/access_token') {
        const body = new URLSearchParams(await readBody(req));
        const basic = req.headers.authorization?.startsWith('Basic ')
          ? Buffer.from(req.headers.authorization.slice(6), 'base64').toString().split(':').map(decodeURIComponent)
          : null;
        const id = basic?.[0] ?? body.get('client_id');
        const secret = basic?.[1] ?? body.get('client_secret');
        if (id !== c.clientId || secret !== c.clientSecret) return json(res, 200, { error: 'incorrect_client_credentials' });
        const grant = codes.get(body.get('code') ?? '');
        codes.delete(body.get('code') ?? '');
        if (fake.failNextToken) {
          fake.failNextToken = false;
          return json(res, 200, { error: 'bad_verification_code', error_description: 'The code passed is incorrect or expired.' });
        }
        if (grant === undefined || body.get('redirect_uri') !== grant.redirectUri) return json(res, 200, { error: 'bad_verification_code' });
        if (grant.challenge !== null && s256(body.get('code_verifier') ?? '') !== grant.challenge) {
          return json(res, 200, { error: 'invalid_grant', error_description: 'PKCE verification failed' });
        }
        const token = `gho_${randomBytes(16).toString('hex')}`;
        tokens.set(token, grant.account);
        return json(res, 200, { access_token: token, token_type: 'bearer', scope: 'read:user,user:email' });
      }
      const account = tokens.get((req.headers.authorization ?? '').replace(/^(Bearer|token) /i, ''));
      if (req.method === 'GET' && (url.pathname === '/user' || url.pathname === '/user/emails')) {
        if (account === undefined) return json(res, 401, { message: 'Bad credentials' });
        if (url.pathname === '/user') {
          return json(res, 200, { id: account.id, login: account.login, email: account.emails.find((e) => e.primary)?.email ?? null });
        }
        return json(res, 200, account.emails);
      }
      json(res, 404, { message: 'Not Found' });
    })().catch((err: unknown) => res.writeHead(500).end(String(err)));
  });
  Object.assign(fake, { base, authorizeUrl: `${base}/login/oauth/authorize`, tokenUrl: `${base}/login/oauth/access_token`, userinfoUrl: `${base}/user` });
  return fake;
}

// ── Apple ───────────────────────────────────────────────────────────────────────────────

export const APPLE_ISSUER = 'https://appleid.apple.com';

export interface AppleLogin {
  email: string;
  /** Apple sends "true" (a string). */
  emailVerified: boolean | 'true' | 'false';
  /** Put this nonce in the id_token instead of the request's. */
  nonce?: string;
  /** Sign the id_token with a key that is not in the JWKS. */
  rogueKey?: boolean;
}

export interface AppleFake {
  base: string;
  authorizeUrl: string;
  tokenUrl: string;
  jwksUrl: string;
  next: { login: AppleLogin } | { deny: true };
  /** The service's Apple settings: APPLE_TEAM_ID, APPLE_KEY_ID, APPLE_PRIVATE_KEY (PEM, made here). */
  env: Record<string, string>;
  /** Claims of every client secret the token endpoint accepted. */
  clientSecrets: Record<string, unknown>[];
}

export async function startApple(t: TapLike, c: Omit<Client, 'clientSecret'>): Promise<AppleFake> {
  const teamId = 'TEAM123456';
  const keyId = 'KEY1234567';
  // The service's key (APPLE_PRIVATE_KEY): the fake knows only its public half.
  const service = await generateKeyPair('ES256', { extractable: true });
  // Apple's id_token key (published in the JWKS) and a rogue one (not published).
  const signing = await generateKeyPair('RS256', { extractable: true });
  const rogue = await generateKeyPair('RS256', { extractable: true });
  const jwk: JWK = { ...(await exportJWK(signing.publicKey)), kid: 'apple-fake-1', alg: 'RS256', use: 'sig' };
  const codes = new Map<string, { login: AppleLogin; nonce: string | null; sub: string }>();
  const fake = { next: { deny: true }, clientSecrets: [] } as unknown as AppleFake;

  const { base } = await listen(t, (req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://apple.test');
      if (req.method === 'GET' && url.pathname === '/auth/keys') return json(res, 200, { keys: [jwk] });
      if (req.method === 'GET' && url.pathname === '/auth/authorize') {
        const q = url.searchParams;
        if (q.get('client_id') !== c.clientId || q.get('redirect_uri') !== c.redirectUri) return json(res, 400, { error: 'invalid_request' });
        if (q.get('response_mode') !== 'form_post' || q.get('response_type') !== 'code') return json(res, 400, { error: 'unsupported_response_type' });
        const fields: Record<string, string> = {};
        const next = fake.next;
        if ('deny' in next) {
          fields.error = 'user_cancelled_authorize';
        } else {
          const code = `c${randomBytes(12).toString('hex')}`;
          codes.set(code, { login: next.login, nonce: q.get('nonce'), sub: `001234.${randomBytes(8).toString('hex')}.0001` });
          fields.code = code;
          fields.user = JSON.stringify({ email: next.login.email, name: { firstName: 'Planted', lastName: 'Name' } });
        }
        if (q.get('state') !== null) fields.state = q.get('state') as string;
        const inputs = Object.entries(fields)
          .map(([k, v]) => `<input type="hidden" name="${escapeHtml(k)}" value="${escapeHtml(v)}">`)
          .join('');
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(
          `<!doctype html><html><body onload="document.forms[0].submit()"><form method="post" action="${escapeHtml(c.redirectUri)}">${inputs}</form></body></html>`,
        );
        return;
      }
      if (req.method === 'POST' && url.pathname === '/auth/token') {
        const body = new URLSearchParams(await readBody(req));
        if (body.get('client_id') !== c.clientId) return json(res, 400, { error: 'invalid_client' });
        try {
          const { payload, protectedHeader } = await jwtVerify(body.get('client_secret') ?? '', service.publicKey, {
            algorithms: ['ES256'],
            issuer: teamId,
            subject: c.clientId,
            audience: APPLE_ISSUER,
          });
          if (protectedHeader.kid !== keyId) throw new Error('kid');
          fake.clientSecrets.push(payload);
        } catch {
          return json(res, 400, { error: 'invalid_client' });
        }
        const grant = codes.get(body.get('code') ?? '');
        codes.delete(body.get('code') ?? '');
        if (grant === undefined || body.get('grant_type') !== 'authorization_code' || body.get('redirect_uri') !== c.redirectUri) {
          return json(res, 400, { error: 'invalid_grant' });
        }
        const nonce = grant.login.nonce ?? grant.nonce;
        const idToken = await new SignJWT({
          email: grant.login.email,
          email_verified: grant.login.emailVerified,
          is_private_email: 'false',
          auth_time: Math.floor(Date.now() / 1000),
          nonce_supported: true,
          ...(nonce !== null ? { nonce } : {}),
        })
          .setProtectedHeader({ alg: 'RS256', kid: 'apple-fake-1' })
          .setIssuer(APPLE_ISSUER)
          .setAudience(c.clientId)
          .setSubject(grant.sub)
          .setIssuedAt()
          .setExpirationTime('10m')
          .sign(grant.login.rogueKey ? rogue.privateKey : signing.privateKey);
        return json(res, 200, {
          access_token: `a${randomBytes(12).toString('hex')}`,
          token_type: 'Bearer',
          expires_in: 3600,
          refresh_token: `r${randomBytes(12).toString('hex')}`,
          id_token: idToken,
        });
      }
      json(res, 404, { error: 'not found' });
    })().catch((err: unknown) => res.writeHead(500).end(String(err)));
  });

  Object.assign(fake, {
    base,
    authorizeUrl: `${base}/auth/authorize`,
    tokenUrl: `${base}/auth/token`,
    jwksUrl: `${base}/auth/keys`,
    env: {
      APPLE_CLIENT_ID: c.clientId,
      APPLE_TEAM_ID: teamId,
      APPLE_KEY_ID: keyId,
      APPLE_PRIVATE_KEY: await exportPKCS8(service.privateKey),
      APPLE_AUTHORIZE_URL: `${base}/auth/authorize`,
      APPLE_TOKEN_URL: `${base}/auth/token`,
      APPLE_JWKS_URL: `${base}/auth/keys`,
    },
  });
  return fake;
}
