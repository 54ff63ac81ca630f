import { Db } from '/work/wt/reqpath/src/core/db.ts';
import { createLogger } from '/work/wt/reqpath/src/core/log.ts';
import { cloneTemplate } from '/work/wt/reqpath/test/helpers/database.ts';
const clone = await cloneTemplate('dbg_');
const db = new Db({ url: clone.url, poolSize: 1, log: createLogger('silent') });
const user = { role: 'service_role', claims: '{"role":"service_role"}', claimsObject: {} };
try {
  const q = () => db.withContext(user, (c) => c.unsafe(`select txid_current()::text as x, now()::text as n`));
  console.log([...await q()], [...await q()]);
  const e = () => db.withContext(user, (c) => c`select txid_current()::text as x, ${1}::int`);
  console.log([...await e()], [...await e()]);
  // DDL then a prepared statement whose result changes: the retry path
  await db.withContext(user, (c) => c`create table public.t1 (a int)`).catch((x) => console.log('ddl', x.message));
  const sql = db.sql; await sql`create table public.t2 (a int)`; await sql`grant all on public.t2 to service_role`;
  const sel = () => db.withContext(user, (c) => c`select * from public.t2 where ${1}::int = 1`);
  console.log([...await sel()]);
  await sql`alter table public.t2 add column b int`; await sql`insert into public.t2 values (1,2)`;
  console.log([...await sel()]);
} finally { await db.end(); await clone.drop(); }
