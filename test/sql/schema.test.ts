/**
 * sql/schema.sql is the schema the migrations produce: a migration that changes the schema
 * without `npm run db:schema` fails here, with the first lines that differ.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { currentSchema, normalise, SCHEMA_FILE } from '../../scripts/schema.ts';

t.test('sql/schema.sql is what the migrations produce', async (t) => {
  const produced = await currentSchema();
  const checkedIn = readFileSync(SCHEMA_FILE, 'utf8');
  if (produced === checkedIn) return t.pass('sql/schema.sql is current');
  const a = checkedIn.split('\n');
  const b = produced.split('\n');
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  t.fail('sql/schema.sql is not what the migrations produce: run `npm run db:schema` and commit it', {
    line: i + 1,
    checkedIn: a.slice(Math.max(0, i - 2), i + 6).join('\n'),
    produced: b.slice(Math.max(0, i - 2), i + 6).join('\n'),
  });
});

t.test('the normalised dump holds nothing of the machine or the run', async (t) => {
  const raw = '--\n-- PostgreSQL database dump\n--\n\n\\restrict abc\n\n-- Dumped from database version 15.20\n-- Dumped by pg_dump version 15.20\n\nSET lock_timeout = 0;\nSELECT pg_catalog.set_config(\'search_path\', \'\', false);\n\n--\n-- Name: auth; Type: SCHEMA; Schema: -; Owner: -\n--\n\nCREATE SCHEMA auth;\n\n\n\\unrestrict abc\n';
  const n = normalise(raw);
  t.notMatch(n, /restrict|Dumped|^SET /m);
  t.match(n, /^--\n-- Name: auth; Type: SCHEMA; Schema: -; Owner: -\n--\n\nCREATE SCHEMA auth;\n$/m);
});
