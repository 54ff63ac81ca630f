/**
 * Ports: whether one can be listened on (the start checks its own, the embedded PostgreSQL
 * its stored one), and a free one for a server that listens a little later (the embedded
 * PostgreSQL, PORT=0 with WORKERS > 1 where the processes must share one, tests' services).
 *
 * A free port is chosen outside the kernel's range of ephemeral ports. A port from
 * `listen(0)` is in that range, where every outgoing connection of every process takes its
 * local port: picked now and listened on seconds later (after initdb, after the workers
 * fork), it can be taken meanwhile (EADDRINUSE). Ports below the range (above it where
 * there is no room) are only ever taken by a listener that asks for them.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

export function portIsFree(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, host, () => s.close(() => resolve(true)));
  });
}

/** The kernel's ephemeral ports (Linux's default where it cannot be read). */
function ephemeralRange(): [number, number] {
  try {
    const [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(lo) && Number.isInteger(hi) && lo > 0 && hi >= lo) return [lo, hi];
  } catch {
    // not Linux
  }
  return [32768, 60999];
}

/** A free port on `host` outside the ephemeral range, chosen at random among 10,000. */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const [lo, hi] = ephemeralRange();
  const span = 10_000;
  const from = lo - span >= 1024 ? lo - span : hi + 1 + span <= 65535 ? hi + 1 : null;
  for (let i = 0; from !== null && i < 100; i++) {
    const port = from + Math.floor(Math.random() * span);
    if (await portIsFree(port, host)) return port;
  }
  throw new Error(`no free port outside the ephemeral range ${lo}–${hi}`);
}
