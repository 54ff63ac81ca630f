/**
 * The `plinth` command (bin/plinth.js), run in the application's folder: every path is the
 * folder's (migrations/, functions/, public/, .plinth/ for the embedded database), plinth's
 * own SQL chain comes from the package. A `.env` there is read first (variables already set
 * win). In plinth's repository it is what `npm run dev`, `npm run db:*`, `npm run gen:types`
 * and `npm run functions:new` run, with the repository's data folder (./.data).
 */
import { existsSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const USAGE = `usage: plinth <command>
  init                      lay out an app here: migrations/, functions/, public/, .env.example, a first test
  start                     the service (embedded PostgreSQL under ./.plinth, or DATABASE_URL)
  dev                       the developer loop: migrations/current.sql applied on save, the service restarted on change
  migrate                   apply committed migrations only
  db commit [--message M] | uncommit | reset | status
  keys                      print the anon and service-role keys
  gen types [--out FILE]    TypeScript types of what REST exposes
  functions new <name> [--no-verify-jwt]
`;

const PACKAGE_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const args = process.argv.slice(2);

function usage(code: number): never {
  (code === 0 ? process.stdout : process.stderr).write(USAGE);
  process.exit(code);
}

/** The subcommand's own arguments become the process's, as each command reads them. */
function shift(n: number): void {
  process.argv = [process.argv[0], process.argv[1], ...args.slice(n)];
}

if (existsSync('.env')) process.loadEnvFile('.env');
// An application's data (the embedded PostgreSQL, the development secret) lives in ./.plinth.
if (process.env.DATA_DIR === undefined && realpathSync(process.cwd()) !== realpathSync(PACKAGE_ROOT)) process.env.DATA_DIR = './.plinth';

switch (args[0]) {
  case 'start':
    // main.ts may re-execute the process with the same arguments: they stay as they are.
    await import('../main.ts');
    break;
  case 'dev':
    shift(1);
    await import('./dev.ts');
    break;
  case 'migrate':
    await import('../migrate.ts');
    break;
  case 'db':
    if (!['commit', 'uncommit', 'reset', 'status'].includes(args[1] ?? '')) usage(2);
    shift(1);
    await import('./gm.ts');
    break;
  case 'keys':
    await import('../keys.ts');
    break;
  case 'gen':
    if (args[1] !== 'types') usage(2);
    shift(2);
    await import('./gen-types.ts');
    break;
  case 'functions':
    if (args[1] !== 'new') usage(2);
    shift(2);
    await import('./functions-new.ts');
    break;
  case 'init': {
    const { init } = await import('./init.ts');
    init(process.cwd());
    break;
  }
  case 'help':
  case '--help':
  case '-h':
    usage(0);
    break;
  default:
    usage(2);
}
