/**
 * ESLint (flat config) with typescript-eslint's type-aware rules: `npm run lint` runs
 * `tsc --noEmit -p .` and then this over src/, scripts/, test/ and dashboard/src
 * (docs/development.md).
 * A rule turned off or narrowed here says why; a single line that breaks a rule on purpose
 * says why on an `eslint-disable-next-line … -- reason` comment, and an unused one is an error.
 */
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * Raw SQL text (`sql.unsafe`, `tx.unsafe`, a lane's `c.unsafe`) only where the text cannot
 * be a tagged template: every other statement is written as `sql\`… ${value}\`` (values bound)
 * with identifiers through `sql(name)`. The files listed are the whole list.
 */
const RAW_SQL_FILES = [
  // The REST compiler's statements: text built from catalog identifiers through one quoting
  // helper, plus `$n` placeholders, cached by query shape.
  'src/rest/execute.ts',
  // POST /api/sql: the caller's own text, as the service role, when the endpoint is enabled.
  'src/dev/index.ts',
  // Migrations: the committed files and the login roles' passwords.
  'src/host/migrate.ts',
  // The request transport: the claims statement it puts in front of every request's work.
  'src/core/db.ts',
  'src/core/lane/*.ts',
  // The live poller: a registered live query's own text (registered through live.subscribe,
  // which only the service role and the owner may call), re-run on the subscriber's lane.
  'src/live/poller.ts',
  // The ten-instance check sets up its schema as a DBA does, with DDL text (as the tests do).
  'scripts/scale-ten.ts',
  // The test harness (plinth/testing): creates, clones and drops databases by name, and runs
  // the application's current.sql, as the test helpers do.
  'src/testing/*.ts',
];

const RAW_SQL = {
  property: 'unsafe',
  message:
    'Raw SQL text is confined to the REST compiler, POST /api/sql, migrations and the transport (eslint.config.js): write a tagged template, values as ${…}, identifiers as sql(name).',
};

export default tseslint.config(
  { ignores: ['node_modules/', 'packages/*/dist/', 'dist/', 'test/vendor/'] },
  { linterOptions: { reportUnusedDisableDirectives: 'error' } },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // A `let` read by a closure before its one assignment (a timer cleared by a callback
      // that may run first) cannot be a `const`: that read would throw.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // `_` marks what is bound on purpose and left unused: a rest sibling that drops keys
      // (`{ iat: _iat, ...rest }`), a parameter an interface imposes, a counted loop variable.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // Off: `async` without `await` is written on purpose, so that a throw becomes a
      // rejection (fastify hooks and handlers, methods of an interface that returns a
      // promise) instead of escaping synchronously; the rule only reports the style.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // The dashboard is a browser bundle (preact, JSX) with its own tsconfig: its files are
    // typed against that project, not the service's.
    files: ['dashboard/src/**/*.ts', 'dashboard/src/**/*.tsx'],
    languageOptions: {
      parserOptions: { projectService: false, project: './tsconfig.dashboard.json', tsconfigRootDir: import.meta.dirname },
    },
  },
  {
    files: ['src/**/*.ts', 'scripts/**/*.ts'],
    ignores: RAW_SQL_FILES,
    rules: { 'no-restricted-properties': ['error', RAW_SQL] },
  },
  {
    // The tests speak HTTP and read JSON bodies as `any` (`await res.json()`) and assert them
    // whole with tap: typing every body would add casts, not checks. tap awaits subtests
    // itself (`t.test(…)` is queued, not floating). The raw-SQL rule does not apply: tests set
    // up schemas as a DBA does, with DDL text. Casts of those `any` bodies are not checked
    // for being needed, and a socket reader may add its Buffer chunks to a string (UTF-8).
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unnecessary-type-assertion': 'off',
      '@typescript-eslint/restrict-plus-operands': 'off',
      '@typescript-eslint/no-floating-promises': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
);
