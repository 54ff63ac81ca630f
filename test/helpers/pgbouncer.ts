/** PgBouncer in transaction mode, started by a test on a free port (test/core/pooler.test.ts, test/core/three.test.ts). */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const PGBOUNCER = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((p) => existsSync(p));

import { freePort } from './ports.ts';

export { freePort };

/** PgBouncer in transaction mode in front of `target` (host, port); as the postgres user when run as root (it refuses root). */
export async function startPgbouncer(t: { teardown(fn: () => unknown): void }, host: string, port: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-pgbouncer-'));
  chmodSync(dir, 0o777);
  const listen = await freePort();
  const users = ['postgres', 'root', 'plinth_anon', 'plinth_authenticated', 'plinth_service', 'plinth_guest', 'plinth_sql'];
  writeFileSync(join(dir, 'users.txt'), users.map((u) => `"${u}" ""`).join('\n') + '\n');
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    `[databases]
* = host=${host} port=${port}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${listen}
unix_socket_dir =
auth_type = trust
auth_file = ${join(dir, 'users.txt')}
pool_mode = transaction
default_pool_size = 4
max_client_conn = 500
logfile = ${join(dir, 'pgbouncer.log')}
pidfile = ${join(dir, 'pgbouncer.pid')}
`,
  );
  for (const f of ['users.txt', 'pgbouncer.ini']) chmodSync(join(dir, f), 0o644);
  const asRoot = process.getuid?.() === 0;
  const child: ChildProcess = asRoot
    ? spawn('runuser', ['-u', 'postgres', '--', PGBOUNCER!, join(dir, 'pgbouncer.ini')], { stdio: 'ignore' })
    : spawn(PGBOUNCER!, [join(dir, 'pgbouncer.ini')], { stdio: 'ignore' });
  t.teardown(async () => {
    // runuser does not pass signals on: stop pgbouncer itself by its pid file.
    try {
      process.kill(Number(readFileSync(join(dir, 'pgbouncer.pid'), 'utf8').trim()), 'SIGINT');
    } catch {
      child.kill('SIGINT');
    }
    const exited = new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  const deadline = Date.now() + 15_000;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(listen, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return listen;
    if (child.exitCode !== null || Date.now() > deadline) {
      const logText = existsSync(join(dir, 'pgbouncer.log')) ? readFileSync(join(dir, 'pgbouncer.log'), 'utf8') : '';
      throw new Error(`pgbouncer did not start: ${logText}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}
