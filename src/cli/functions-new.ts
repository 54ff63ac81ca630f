/**
 * `npm run functions:new -- <name> [--no-verify-jwt]`: the developer's loop for edge
 * functions (issue 14 item 6). Writes FUNCTIONS_DIR/<name>/index.ts from a small template
 * (never over an existing file) and inserts the catalog row `(name, 'deno')` into the
 * development database (DATABASE_URL, or the embedded PostgreSQL under DATA_DIR, as
 * `npm run dev` uses). A running service picks both up at once: the row through the
 * catalog NOTIFY, the file on the next call (the bundled runtime starts when FUNCTIONS_DIR
 * first exists).
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { parseConfig } from '../core/config.ts';
import { devDatabases } from './dev-env.ts';

const TEMPLATE = (name: string) => `// Edge function "${name}": served by plinth at /functions/v1/${name} (see docs/api/functions.md).
// The default export takes the request and returns the response; Deno's Web APIs are here.
export default async (req: Request): Promise<Response> => {
  const input = req.method === 'POST' ? await req.json().catch(() => ({})) : {};
  return Response.json({ message: \`Hello from ${name}!\`, input });
};
`;

const { values, positionals } = parseArgs({
  options: { 'no-verify-jwt': { type: 'boolean', default: false } },
  allowPositionals: true,
});
const name = positionals[0];
if (positionals.length !== 1 || !/^[A-Za-z0-9_][A-Za-z0-9_-]*$/.test(name)) {
  process.stderr.write('usage: plinth functions new <name> [--no-verify-jwt]   (name: letters, digits, _ and -)\n');
  process.exit(1);
}

const config = parseConfig(process.env);
const file = join(config.functionsDir, name, 'index.ts');
if (existsSync(file)) {
  process.stdout.write(`${relative(process.cwd(), file)} exists; left as it is\n`);
} else {
  mkdirSync(join(config.functionsDir, name), { recursive: true });
  writeFileSync(file, TEMPLATE(name));
  process.stdout.write(`wrote ${relative(process.cwd(), file)}\n`);
}

const dbs = await devDatabases();
const sql = postgres(dbs.url, { max: 1, onnotice: () => {} });
try {
  const rows = await sql`
    insert into edge.functions (name, runtime, verify_jwt) values (${name}, 'deno', ${!values['no-verify-jwt']})
    on conflict (name) do nothing
    returning name`;
  process.stdout.write(rows.length === 1 ? `catalog row added: ${name} (deno)\n` : `catalog row ${name} exists; left as it is\n`);
} catch (err) {
  const code = (err as { code?: string }).code;
  process.stderr.write(
    code === '42P01' || code === '3F000'
      ? 'edge.functions is missing: run the migrations first (npm start once, or npm run dev)\n'
      : `could not add the catalog row: ${err instanceof Error ? err.message : String(err)}\n`,
  );
  process.exitCode = 1;
} finally {
  await sql.end();
  await dbs.stop();
}
