/** The storage area's refusals (docs/api/storage.md), and begin_upload's statuses as them. */
import { AppError, ERRORS } from '../core/errors.ts';
import type * as sdb from './db.ts';

export const STORAGE_ERRORS = {
  bucketNotFound: () => new AppError(404, 'bucket not found'),
  objectNotFound: () => new AppError(404, 'object not found'),
  bucketExists: () => new AppError(409, 'bucket already exists'),
  bucketNotEmpty: () => new AppError(409, 'bucket not empty'),
  objectExists: () => new AppError(409, 'object already exists'),
  tooLarge: () => new AppError(413, 'object exceeds the bucket file size limit'),
  mimeNotAllowed: () => new AppError(415, 'mime type not allowed'),
  rangeNotSatisfiable: (size: number) => new AppError(416, 'range not satisfiable', { headers: { 'content-range': `bytes */${size}` } }),
  noFilePart: () => new AppError(400, 'missing file part'),
} as const;

/** begin_upload's refusals as errors. */
export function throwUnlessOk(status: sdb.BeginUploadStatus): void {
  switch (status) {
    case 'ok':
      return;
    case 'bucket_not_found':
      throw STORAGE_ERRORS.bucketNotFound();
    case 'too_large':
      throw STORAGE_ERRORS.tooLarge();
    case 'mime_not_allowed':
      throw STORAGE_ERRORS.mimeNotAllowed();
    case 'exists':
      throw STORAGE_ERRORS.objectExists();
    case 'forbidden':
      throw ERRORS.permissionDenied();
    default:
      return status satisfies never;
  }
}
