/**
 * A port for a server a test starts a little later (a service, PgBouncer, an S3 stand-in):
 * the service's own choice (src/host/ports.ts), free when asked and outside the kernel's
 * range of ephemeral ports, where an outgoing connection cannot take it meanwhile.
 */
export { freePort } from '../../src/host/ports.ts';
