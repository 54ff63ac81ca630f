/**
 * `npm run gen:types [-- --out FILE]`: TypeScript types of the tables, views and functions
 * REST exposes, in the `Database` shape `@supabase/postgrest-js` and supabase-js take
 * (`new PostgrestClient<Database>(…)`), from the same catalog REST serves. Reads
 * DATABASE_URL (or the embedded PostgreSQL under DATA_DIR, as `npm run dev`); prints to
 * stdout, or writes FILE.
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { devDatabases } from './dev-env.ts';
import { loadCatalog } from '../rest/catalog.ts';
import { generateTypes } from '../rest/types.ts';

const { values: args } = parseArgs({ options: { out: { type: 'string' } } });
const dbs = await devDatabases();
const sql = postgres(dbs.url, { max: 1, onnotice: () => {} });
let code = 0;
try {
  const text = generateTypes(await loadCatalog(sql));
  if (args.out) writeFileSync(args.out, text);
  else process.stdout.write(text);
} catch (err) {
  console.error(`gen:types: ${err instanceof Error ? err.message : String(err)}`);
  code = 1;
} finally {
  await sql.end();
  await dbs.stop();
}
process.exit(code);
