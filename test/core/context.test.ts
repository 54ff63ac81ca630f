/**
 * The request context (design.md): work runs as the request's role with its claims, set
 * in a statement before the work, in one transaction. anon gets 403 on an ungranted table
 * and never sees a row RLS hides; a failed statement leaves nothing behind.
 */
import t from 'tap';
import postgres from 'postgres';
import { AUTHENTICATOR_ROLE, Db, type RequestContext } from '../../src/core/db.ts';
import { createLogger } from '../../src/core/log.ts';
import { pgErrorToAppError } from '../../src/core/errors.ts';
import { createTestDatabase } from '../helpers/database.ts';

const anon: RequestContext = { role: 'anon', claims: '{"role":"anon"}', claimsObject: { role: 'anon' } };
const userId = '11111111-1111-4111-8111-111111111111';
const user: RequestContext = {
  role: 'authenticated',
  claims: JSON.stringify({ role: 'authenticated', sub: userId }),
  claimsObject: { role: 'authenticated', sub: userId },
};

t.test('withContext', async (t) => {
  const tdb = await createTestDatabase(t);
  await tdb.sql.unsafe(`
    create table public.secrets (id int primary key);
    insert into public.secrets values (1);
    create table public.notes (id int primary key, owner uuid, body text);
    alter table public.notes enable row level security;
    grant select, insert on public.notes to anon, authenticated;
    create policy own on public.notes for select using (owner = auth.uid());
    create policy ins on public.notes for insert with check (true);
    insert into public.notes values (1, '${userId}', 'mine'), (2, gen_random_uuid(), 'theirs');
  `);
  const db = new Db({ url: tdb.url, poolSize: 2, log: createLogger('silent') });
  t.teardown(() => db.end());

  const who = await db.withContext(user, (c) => c`select current_user as role, auth.uid() as uid, auth.role() as claim_role`);
  t.same([...who], [{ role: 'authenticated', uid: userId, claim_role: 'authenticated' }], 'the statement runs as the role, with the claims');

  const err = await db.withContext(anon, (c) => c`select * from public.secrets`).catch((e: unknown) => e);
  t.equal(pgErrorToAppError(err).status, 403, 'anon on an ungranted table: 403');
  t.equal(pgErrorToAppError(err).publicMessage, 'permission denied');

  const anonRows = await db.withContext(anon, (c) => c`select id from public.notes`);
  t.same([...anonRows], [], 'anon sees no row RLS hides');
  const userRows = await db.withContext(user, (c) => c`select id, body from public.notes order by id`);
  t.same([...userRows], [{ id: 1, body: 'mine' }], 'the user sees only its own rows');

  // The role is local to the transaction: the pooled connection is back to the connecting role.
  const [after] = await db.sql`select current_user as role, current_setting('request.jwt.claims', true) as claims`;
  t.not(after.role, 'authenticated');
  t.ok(after.claims === '' || after.claims === null, 'claims do not leak to the next use of the connection');

  // A failed statement rolls back and the connection stays usable.
  await t.rejects(db.withContext(anon, (c) => c`insert into public.notes values (3, null, 'x'), (3, null, 'dup')`));
  const [{ n }] = await tdb.sql`select count(*)::int as n from public.notes where id = 3`;
  t.equal(n, 0, 'nothing half-written');
  const ok = await db.withContext(anon, (c) => c`select 1 as one`);
  t.equal(ok[0].one, 1, 'the connection is reusable after a failure');

  // Several statements in one transaction.
  const res = await db.transactionWithContext(user, async (c) => {
    await c`insert into public.notes values (10, ${userId}, 'a')`;
    const [r] = await c`select count(*)::int as n from public.notes`;
    return r.n as number;
  });
  t.equal(res, 2, 'transactionWithContext runs as the role for every statement');
  await t.rejects(
    db.transactionWithContext(user, async (c) => {
      await c`insert into public.notes values (11, ${userId}, 'b')`;
      await c`select * from public.secrets`;
    }),
  );
  const [{ m }] = await tdb.sql`select count(*)::int as m from public.notes where id = 11`;
  t.equal(m, 0, 'a failure rolls the whole transaction back');

  // Many concurrent contexts on a pool of two never mix roles up.
  const results = await Promise.all(
    Array.from({ length: 40 }, (_, i) => db.withContext(i % 2 ? user : anon, (c) => c`select current_user as r`)),
  );
  t.ok(results.every((r, i) => r[0].r === (i % 2 ? 'authenticated' : 'anon')), 'pipelined contexts stay separate');

  // Lanes idle as plinth_authenticator, which can do nothing: a statement that ever ran
  // outside its block would fail instead of running as the owner.
  const stray = postgres(tdb.url, { max: 1, onnotice: () => {}, connection: { role: AUTHENTICATOR_ROLE } });
  t.teardown(() => stray.end());
  const [{ who: idle }] = await stray`select current_user as who`;
  t.equal(idle, AUTHENTICATOR_ROLE);
  const denied = await stray`select * from public.notes`.catch((e: unknown) => e);
  t.equal((denied as { code?: string }).code, '42501', 'the idle role cannot read a table granted to anon');
});
