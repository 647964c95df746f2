import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy a test can cut and restore, put between parley and its database to take the
 * database away without stopping it. While cut, nothing listens on the port (connecting is
 * refused) and every connection that was open is reset; restored, it listens on the same port.
 * Blackholed, it accepts connections and never answers, as a host behind a broken network does.
 */
export async function startTcpProxy(target: { host: string; port: number }) {
  const sockets = new Set<Socket>();
  const track = (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  };
  let silent = false;
  const server: Server = createServer((client) => {
    track(client);
    if (silent) return void client.on('error', () => {});
    const upstream = connect(target.port, target.host);
    track(upstream);
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  await listen(0);
  const port = (server.address() as { port: number }).port;
  let cut = false;

  return {
    port,
    /** The same URL with host and port pointing at the proxy. */
    through(url: string) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    /** Stops listening and resets every open connection. */
    async cut() {
      if (cut) return;
      cut = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.resetAndDestroy();
      await closed;
    },
    async restore() {
      silent = false;
      if (!cut) return;
      cut = false;
      await listen(port);
    },
    /** Resets every open connection; new ones are accepted and never answered. */
    blackhole() {
      silent = true;
      for (const s of sockets) s.resetAndDestroy();
    },
    async close() {
      for (const s of sockets) s.destroy();
      if (!cut) await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export type TcpProxy = Awaited<ReturnType<typeof startTcpProxy>>;
