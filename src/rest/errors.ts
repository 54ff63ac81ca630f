/** The REST area's errors: messages and the AppError each refusal becomes (docs/api/rest.md). */
import { AppError } from '../core/errors.ts';
import { GrammarError, INVALID_EMBED } from './grammar.ts';

export const MSG = {
  relationNotFound: 'relation not found',
  functionNotFound: 'function not found',
  unknownColumn: 'unknown column in request',
  singular: 'JSON object requested, multiple (or no) rows returned',
} as const;

export const REST_ERRORS = {
  relationNotFound: () => new AppError(404, MSG.relationNotFound),
  functionNotFound: () => new AppError(404, MSG.functionNotFound),
  unknownColumn: (column?: string, relation?: string) => new AppError(400, MSG.unknownColumn, { internal: { column, relation } }),
  invalidEmbed: () => new AppError(400, INVALID_EMBED),
  /** Several relationships fit an embed: the message names the hints that pick one. */
  ambiguousEmbed: (from: string, name: string, hints: readonly string[]) =>
    new AppError(400, `${INVALID_EMBED}: more than one relationship between ${from} and ${name}; use one of ${hints.join(', ')}`),
  schemaNotExposed: () => new AppError(406, 'only the public schema is exposed'),
  methodNotAllowed: () => new AppError(405, 'method not allowed'),
  singular: () => new AppError(406, MSG.singular),
} as const;

/** GrammarError (status 400, public message) → AppError; anything else unchanged. */
export function grammarToAppError(err: unknown): unknown {
  return err instanceof GrammarError ? new AppError(400, err.publicMessage, { cause: err }) : err;
}
