import { spawn } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { trackChild } from './process.ts';
import { freePort, trueClockEnv } from './servers.ts';

export const NGINX = '/usr/sbin/nginx';

/** Several instances behind one nginx: requests spread by `hash` (an nginx expression, `consistent`). */
export interface UpstreamPool {
  /** `host:port` of each instance. */
  servers: string[];
  hash: string;
}

/**
 * A real nginx in front of `upstream` (one URL, or a pool of instances), as a child process
 * (killed when the test file ends), with its own config, pid, logs and temp folders in a temp
 * dir. The proxy is as nginx ships it, with nothing but `proxy_pass`: response buffering on, the
 * setting that holds event streams back. Through a pool, every answer names the instance that
 * gave it in `X-Upstream`, for the test to see where requests went.
 */
export async function startNginx(upstream: string | UpstreamPool) {
  const pool = typeof upstream === 'string' ? null : upstream;
  const dir = await mkdtemp(join(tmpdir(), 'parley-nginx-'));
  const port = await freePort();
  const conf = join(dir, 'nginx.conf');
  await writeFile(
    conf,
    `daemon off;
master_process off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 512; }
http {
  access_log off;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  ${pool ? `upstream pool { hash ${pool.hash} consistent; ${pool.servers.map((server) => `server ${server};`).join(' ')} }` : ''}
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass ${pool ? 'http://pool' : upstream};
      ${pool ? 'add_header X-Upstream $upstream_addr always;' : ''}
    }
  }
}
`,
  );
  const child = trackChild(spawn(NGINX, ['-p', dir, '-c', conf, '-e', join(dir, 'error.log')], { stdio: 'ignore', env: trueClockEnv() }));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  const url = `http://127.0.0.1:${port}`;
  const errors = () => readFile(join(dir, 'error.log'), 'utf8').catch(() => '');
  // Ready once it answers through to the upstream.
  for (;;) {
    const stopped = await Promise.race([exited.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 20))]);
    if (stopped) throw new Error(`nginx exited at start:\n${await errors()}`);
    const ok = await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
  }
  return {
    url,
    errors,
    async close() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}
