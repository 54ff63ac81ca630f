/**
 * Test databases: one migrated template per content of the SQL (committed migrations,
 * current.sql and its fixtures, the pgTAP helpers), built once and reused; each test file
 * clones it and drops its clone at teardown. The template and clone logic is
 * src/testing/template.ts, which `plinth/testing` ships to applications.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import * as tpl from '../../src/testing/template.ts';

export { serverUrl, type ClonedDatabase } from '../../src/testing/template.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const HELPERS_SQL = join(ROOT, 'test/sql/_helpers.sql');

/** plinth's own test template: pgTAP and dblink, the chains, the pgTAP helpers. */
const OPTIONS: tpl.TemplateOptions = {
  before: `create schema if not exists extensions;
    create extension if not exists pgtap schema extensions;
    create extension if not exists dblink schema extensions;`,
  afterFiles: [HELPERS_SQL],
};

export function templateName(): string {
  return tpl.templateName(OPTIONS);
}

/** Build the template for the current SQL if it does not exist yet; returns its name. */
export function ensureTemplate(): Promise<string> {
  return tpl.ensureTemplate(OPTIONS);
}

/** A fresh clone of the template, named `<prefix><random>`; the caller drops it. */
export function cloneTemplate(prefix = 't_'): Promise<tpl.ClonedDatabase> {
  return tpl.cloneTemplate(prefix, OPTIONS);
}

export interface TestDatabase {
  name: string;
  url: string;
  /** A superuser connection to this database, for setting up fixtures and checking results. */
  sql: postgres.Sql;
}

interface Teardownable {
  teardown(fn: () => unknown): void;
}

/** A fresh database cloned from the template, dropped when the test `t` ends. */
export async function createTestDatabase(t: Teardownable): Promise<TestDatabase> {
  const clone = await cloneTemplate('t_');
  const sql = postgres(clone.url, { max: 2, onnotice: () => {} });
  t.teardown(async () => {
    await sql.end({ timeout: 1 });
    await clone.drop();
  });
  return { name: clone.name, url: clone.url, sql };
}
