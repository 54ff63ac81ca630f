/**
 * Typed wrappers of the admin user functions (sql/fixtures/auth/admin_users.sql), beside
 * db.ts (which is near the size limit); the same conventions: one wrapper per function,
 * expected outcomes as a `status` the routes switch on.
 */
import type postgres from 'postgres';
import type { Sql } from '../core/db.ts';
import { pgErrorToAppError } from '../core/errors.ts';
import { auditParam, type AuditContext } from './db.ts';

async function call<T>(q: Promise<T>): Promise<T> {
  try {
    return await q;
  } catch (err) {
    throw pgErrorToAppError(err, { trusted: true });
  }
}

const json = (sql: Sql, v: Record<string, unknown> | null) => (v === null ? null : sql.json(v as postgres.JSONValue));

/** The User object with GoTrue's admin fields (auth_private.admin_user_json). */
export type AdminUser = Record<string, unknown> & { id: string; email: string | null };

export async function parseBanDuration(sql: Sql, d: string): Promise<string | null> {
  const [r] = await call(sql<{ i: string | null }[]>`select auth_private.parse_ban_duration(${d})::text as i`);
  return r.i;
}

export async function adminGetUser(sql: Sql, userId: string): Promise<{ status: 'ok' | 'not_found'; user_json: AdminUser | null }> {
  const [r] = await call(sql<{ status: 'ok' | 'not_found'; user_json: AdminUser | null }[]>`select * from auth.admin_get_user(${userId}::uuid)`);
  return r;
}

export interface AdminUpdate {
  email: string | null;
  passwordHash: string | null;
  userMetadata: Record<string, unknown> | null;
  appMetadata: Record<string, unknown> | null;
  role: string | null;
  emailConfirm: boolean | null;
  /** An interval as PostgreSQL text ('0' lifts a ban); null leaves the ban alone. */
  ban: string | null;
  context: AuditContext | null;
}

export async function adminUpdateUser(
  sql: Sql,
  userId: string,
  u: AdminUpdate,
): Promise<{ status: 'ok' | 'not_found' | 'email_taken'; user_json: AdminUser | null }> {
  const [r] = await call(
    sql<{ status: 'ok' | 'not_found' | 'email_taken'; user_json: AdminUser | null }[]>`select * from auth.admin_update_user(${userId}::uuid,
      ${u.email}, ${u.passwordHash}, ${json(sql, u.userMetadata)}::jsonb, ${json(sql, u.appMetadata)}::jsonb, ${u.role},
      ${u.emailConfirm}::boolean, ${u.ban}::interval, ${auditParam(sql, u.context)}::jsonb)`,
  );
  return r;
}

export async function adminInviteUser(
  sql: Sql,
  email: string,
  userMetadata: Record<string, unknown> | null,
  tokenHash: Buffer,
  sealed: string,
  context: AuditContext | null,
): Promise<{ status: 'ok' | 'email_taken'; user_json: AdminUser | null }> {
  const [r] = await call(
    sql<{ status: 'ok' | 'email_taken'; user_json: AdminUser | null }[]>`select * from auth.admin_invite_user(${email},
      ${json(sql, userMetadata)}::jsonb, ${tokenHash}, ${sealed}, ${auditParam(sql, context)}::jsonb)`,
  );
  return r;
}

export type LinkType = 'signup' | 'invite' | 'magiclink' | 'recovery';

export interface GeneratedLink {
  status: 'ok' | 'email_taken' | 'not_found';
  user_json: AdminUser | null;
  verification_type: LinkType | null;
}

export async function adminGenerateLink(
  sql: Sql,
  type: LinkType,
  email: string,
  passwordHash: string | null,
  userMetadata: Record<string, unknown> | null,
  tokenHash: Buffer,
  context: AuditContext | null,
): Promise<GeneratedLink> {
  const [r] = await call(
    sql<GeneratedLink[]>`select * from auth.admin_generate_link(${type}, ${email}, ${passwordHash}, ${json(sql, userMetadata)}::jsonb,
      ${tokenHash}, ${auditParam(sql, context)}::jsonb)`,
  );
  return r;
}
