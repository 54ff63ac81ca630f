/** The REST area's errors: messages and the AppError each refusal becomes (docs/api/rest.md). */
import { AppError } from '../core/errors.ts';
import { GrammarError, INVALID_EMBED } from './grammar.ts';

export const MSG = {
  relationNotFound: 'relation not found',
  functionNotFound: 'function not found',
  unknownColumn: 'unknown column in request',
  singular: 'JSON object requested, multiple (or no) rows returned',
  maxAffected: 'more rows affected than Prefer: max-affected allows',
} as const;

/** One of the relationships an ambiguous embed could mean, as PostgREST's PGRST201 details name it (SUPABASE_COMPAT=true). */
export interface Candidate {
  readonly cardinality: string;
  readonly embedding: string;
  readonly relationship: string;
}

export const REST_ERRORS = {
  /** The name (at most an identifier's 63 characters) goes to the log line only. */
  relationNotFound: (relation?: string) => new AppError(404, MSG.relationNotFound, relation === undefined ? {} : { internal: { relation: relation.slice(0, 63) } }),
  functionNotFound: (fn?: string) => new AppError(404, MSG.functionNotFound, fn === undefined ? {} : { internal: { function: fn.slice(0, 63) } }),
  unknownColumn: (column?: string, relation?: string) => new AppError(400, MSG.unknownColumn, { internal: { column, relation } }),
  /** No relationship between the two (their names, as the request wrote them, go to the log line and SUPABASE_COMPAT's message). */
  invalidEmbed: (from?: string, to?: string) => new AppError(400, INVALID_EMBED, from === undefined ? {} : { internal: { from, to } }),
  /** Several relationships fit an embed: the message names the hints that pick one. */
  ambiguousEmbed: (from: string, name: string, hints: readonly string[], candidates: readonly Candidate[] = []) =>
    new AppError(400, `${INVALID_EMBED}: more than one relationship between ${from} and ${name}; use one of ${hints.join(', ')}`, {
      internal: { from, to: name, hints, candidates },
    }),
  /** Two select items of one level with one output name. */
  duplicateName: (name: string) => new AppError(400, `duplicate output name in select: ${name}; give one an alias`),
  schemaNotExposed: () => new AppError(406, 'only the public schema is exposed'),
  methodNotAllowed: () => new AppError(405, 'method not allowed'),
  /** `rows`: how many there were (SUPABASE_COMPAT's details say it, as PostgREST's). */
  singular: (rows?: number) => new AppError(406, MSG.singular, rows === undefined ? {} : { internal: { rows } }),
  maxAffected: () => new AppError(400, MSG.maxAffected),
  /** SUPABASE_COMPAT's merging upsert given two rows of one key (PostgreSQL's 21000, its own words: no value of a row). */
  upsertSameRowTwice: (cause: unknown) =>
    new AppError(400, 'ON CONFLICT DO UPDATE command cannot affect row a second time', { cause, internal: { code: '21000' } }),
  aggregatesOff: () => new AppError(400, 'aggregate functions are not enabled'),
  notAcceptable: () => new AppError(406, 'none of the accepted media types can be produced'),
} as const;

/** GrammarError (status 400, public message) → AppError; anything else unchanged. */
export function grammarToAppError(err: unknown): unknown {
  return err instanceof GrammarError ? new AppError(400, err.publicMessage, { cause: err }) : err;
}
