/**
 * Logging: one pino logger per service instance; fastify uses the same one.
 * Errors are logged with their SQLSTATE `code` and `constraint_name`, never sent to clients.
 */
import { pino } from 'pino';

export type Logger = pino.Logger;

export function createLogger(level: string): Logger {
  return pino({
    level,
    base: undefined,
    redact: {
      paths: ['req.headers.authorization', 'req.headers.apikey', 'req.headers.cookie', '*.password', '*.token', '*.refresh_token'],
      censor: '[redacted]',
    },
  });
}
