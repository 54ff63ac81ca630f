/**
 * A software WebAuthn authenticator for the HTTP tests: a P-256 key per credential, "none"
 * attestation, and assertions signed as an authenticator signs them (WebAuthn §6.1, §6.3.3),
 * with every field the tests need to get wrong on purpose (origin, counter, user handle).
 * The real-browser test (test/client/browser-passkeys.test.ts) uses Chromium's virtual
 * authenticator instead.
 */
import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { isoCBOR } from '@simplewebauthn/server/helpers';

const b64u = (b: Uint8Array | string) => Buffer.from(b).toString('base64url');
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest();

export interface SoftCredential {
  id: Buffer;
  key: KeyObject;
  cose: Uint8Array;
  /** The user handle the authenticator keeps (options.user.id). */
  userHandle: string;
  counter: number;
}

function coseKey(pub: KeyObject): Uint8Array {
  const jwk = pub.export({ format: 'jwk' });
  return isoCBOR.encode(
    new Map<number, number | Uint8Array>([
      [1, 2],
      [3, -7],
      [-1, 1],
      [-2, new Uint8Array(Buffer.from(jwk.x!, 'base64url'))],
      [-3, new Uint8Array(Buffer.from(jwk.y!, 'base64url'))],
    ]),
  );
}

function clientData(type: string, challenge: string, origin: string): Buffer {
  return Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }));
}

function counterBytes(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

/** FLAGS: UP | UV (| AT for a new credential). */
const UP_UV = 0x01 | 0x04;

/** navigator.credentials.create() for `options` (the server's registration options) on `origin`. */
export function create(
  options: { challenge: string; rp: { id: string }; user: { id: string } },
  origin: string,
  reuse?: SoftCredential,
): { credential: SoftCredential; response: Record<string, unknown> } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const credential: SoftCredential = reuse
    ? { ...reuse, userHandle: options.user.id }
    : { id: randomBytes(16), key: privateKey, cose: coseKey(publicKey), userHandle: options.user.id, counter: 0 };
  const idLen = Buffer.alloc(2);
  idLen.writeUInt16BE(credential.id.length);
  const authData = Buffer.concat([
    sha256(Buffer.from(options.rp.id)),
    Buffer.from([UP_UV | 0x40]),
    counterBytes(credential.counter),
    Buffer.alloc(16), // aaguid: none
    idLen,
    credential.id,
    Buffer.from(credential.cose),
  ]);
  const attestationObject = isoCBOR.encode(new Map<string, unknown>([['fmt', 'none'], ['attStmt', new Map()], ['authData', new Uint8Array(authData)]]) as never);
  return {
    credential,
    response: {
      id: b64u(credential.id),
      rawId: b64u(credential.id),
      type: 'public-key',
      response: {
        clientDataJSON: b64u(clientData('webauthn.create', options.challenge, origin)),
        attestationObject: b64u(attestationObject),
        transports: ['internal'],
      },
      clientExtensionResults: {},
    },
  };
}

/** navigator.credentials.get() for `options` (the server's authentication options) with `credential`. */
export function get(
  options: { challenge: string; rpId: string },
  origin: string,
  credential: SoftCredential,
  opts: { counter?: number; userHandle?: string } = {},
): Record<string, unknown> {
  credential.counter = opts.counter ?? credential.counter;
  const authData = Buffer.concat([sha256(Buffer.from(options.rpId)), Buffer.from([UP_UV]), counterBytes(credential.counter)]);
  const cdj = clientData('webauthn.get', options.challenge, origin);
  const signature = sign('sha256', Buffer.concat([authData, sha256(cdj)]), credential.key);
  return {
    id: b64u(credential.id),
    rawId: b64u(credential.id),
    type: 'public-key',
    response: {
      clientDataJSON: b64u(cdj),
      authenticatorData: b64u(authData),
      signature: b64u(signature),
      userHandle: opts.userHandle ?? credential.userHandle,
    },
    clientExtensionResults: {},
  };
}
