/**
 * A loopback TCP proxy between the app and PostgreSQL, so a test can cut the database
 * away and restore it without stopping the shared server (design.md, "Tests get real parts").
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface TcpProxy {
  port: number;
  /** Refuse new connections and destroy the open ones. */
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  let up = true;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    if (!up) {
      client.destroy();
      return;
    }
    const upstream = connect(targetPort, targetHost);
    sockets.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const cut = () => {
    up = false;
    for (const s of sockets) s.destroy();
    sockets.clear();
  };
  return {
    port: typeof addr === 'object' && addr ? addr.port : 0,
    cut,
    restore() {
      up = true;
    },
    close() {
      cut();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
