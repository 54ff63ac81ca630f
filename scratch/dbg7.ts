import { Db } from '/work/wt/reqpath/src/core/db.ts';
import { createLogger } from '/work/wt/reqpath/src/core/log.ts';
import { cloneTemplate } from '/work/wt/reqpath/test/helpers/database.ts';
const clone = await cloneTemplate('dbg_');
const db = new Db({ url: clone.url, poolSize: 1, log: createLogger('silent') });
const user = { role: 'authenticated', claims: '{"role":"authenticated","sub":"x"}', claimsObject: {} };
try {
  for (let i = 0; i < 3; i++) {
    const r = await db.withContext(user, (c) => c.unsafe(`select current_user as role, current_setting('request.jwt.claims', true) as c, current_setting('statement_timeout') as t`));
    const r2 = await db.withContext(user, (c) => c`select current_setting('request.jwt.claims', true) as c, ${i}::int as i`);
    console.log([...r], [...r2]);
  }
  console.log(await Promise.all([1,2,3].map(() => db.withContext(user, (c) => c.unsafe(`select current_setting('request.jwt.claims', true) as c`)))));
} finally { await db.end(); await clone.drop(); }
