/** POST /auth/v1/signup: an account by email and password (docs/api/auth.md), signed in at once or awaiting confirmation. */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../core/area.ts';
import { unreachable } from '../../core/errors.ts';
import * as q from '../db.ts';
import { AUTH_ERRORS, MESSAGES } from '../errors.ts';
import { hashPassword } from '../passwords.ts';
import { sessionFromGrant } from '../sessions.ts';
import { newOpaqueToken, seal } from '../tokens.ts';
import { checkEmail, checkPassword } from '../validate.ts';
import { authRoom, body, grant, obj, sendSession, str, type AuthRoom } from './room.ts';

const signupSchema = { type: 'object', required: ['email', 'password'], properties: { email: str, password: str, data: obj } } as const;

interface SignupBody {
  email: string;
  password: string;
  data?: Record<string, unknown>;
}

async function signup(room: AuthRoom, req: FastifyRequest<{ Body: SignupBody }>, reply: FastifyReply): Promise<FastifyReply> {
  const { deps, config, sql, audit } = room;
  const b = body(req.body);
  checkEmail(b.email);
  checkPassword(b.password);
  const passwordHash = await hashPassword(b.password);
  let verification: { hash: Buffer; sealed: string } | null = null;
  let refresh: ReturnType<typeof newOpaqueToken> | null = null;
  if (config.requireEmailVerification) {
    const t = newOpaqueToken();
    verification = { hash: t.hash, sealed: seal(config.secret, t.token) };
  } else {
    refresh = newOpaqueToken();
  }
  const r = await q.signUp(sql, {
    email: b.email,
    passwordHash,
    userMetadata: b.data ?? null,
    verification,
    refreshHash: refresh?.hash ?? null,
    refreshTtl: config.refreshTokenTtl,
    context: audit(req),
  });
  switch (r.status) {
    case 'ok':
      return sendSession(reply, 201, await sessionFromGrant(deps, grant(r), refresh!.token, 'password'));
    case 'confirmation_sent':
      return reply.code(200).send({ message: MESSAGES.confirmationSent });
    case 'email_taken':
      throw AUTH_ERRORS.emailTaken();
    default:
      return unreachable(r.status);
  }
}

export function registerSignupRoutes(app: FastifyInstance, deps: Deps): void {
  const room = authRoom(deps);
  app.post<{ Body: SignupBody }>('/auth/v1/signup', { schema: { body: signupSchema }, onRequest: room.authRateLimit }, (req, reply) =>
    signup(room, req, reply),
  );
}
