/** The auth area's own errors and messages (docs/api/auth.md), shared by its route modules. */
import { AppError } from '../core/errors.ts';

export const AUTH_ERRORS = {
  invalidOneTimeToken: () => new AppError(400, 'invalid or expired token'),
  invalidUserId: () => new AppError(400, 'invalid user id'),
  invalidCredentials: () => new AppError(401, 'invalid email or password'),
  invalidRefreshToken: () => new AppError(401, 'invalid refresh token'),
  refreshTokenExpired: () => new AppError(401, 'refresh token expired'),
  refreshTokenReuse: () => new AppError(401, 'refresh token reuse detected — please log in again'),
  emailNotVerified: () => new AppError(403, 'email not verified'),
  userNotFound: () => new AppError(404, 'user not found'),
  emailTaken: () => new AppError(409, 'email already registered'),
  tooManyRequests: () => new AppError(429, 'too many requests, try again later'),
  anonymousDisabled: () => new AppError(503, 'anonymous sign-ins are disabled'),
} as const;

export const MESSAGES = {
  confirmationSent: 'check your email to confirm your address',
  recoverySent: 'if the address is registered, a password recovery email has been sent',
  passwordUpdated: 'password updated',
  magicLinkSent: 'if the address is registered, a sign-in link has been sent',
  emailVerified: 'email verified',
} as const;
