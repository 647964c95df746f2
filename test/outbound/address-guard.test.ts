import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadToolRegistry } from '../../src/domain/tools/registry.ts';
import { httpExecutor } from '../../src/executors/http.ts';
import { addressGuard, guardedFetch, isInside } from '../../src/outbound/address-guard.ts';
import { webhookSender } from '../../src/outbound/webhook-sender.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';

// The one guard of the URLs the service is given to call, and the callers that check again at
// each call (the webhook sender, the tool services' client): what is refused without the
// operator's leave, over real sockets on loopback.

const strict = { allowHttp: false, allowPrivate: false };
const loose = { allowHttp: true, allowPrivate: true };

let server: Server;
let base: string;
const hits: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    hits.push(req.url ?? '');
    if (req.url === '/redirect') return res.writeHead(302, { location: `${base}/elsewhere` }).end();
    if (req.url === '/big') return res.writeHead(200).end('x'.repeat(100_000));
    if (req.url === '/tool') return res.writeHead(200, { 'content-type': 'application/json' }).end('{"result": {"made": 1}}');
    if (req.url === '/tool-moved') return res.writeHead(307, { location: `${base}/tool` }).end();
    res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const post = (config: typeof strict, url: string) =>
  webhookSender(config).post({ url, headers: {}, body: '{}', timeoutMs: 5_000, maxAnswerBytes: 4096 });

describe('the address guard', () => {
  it.each([
    ['http://example.com/hook', 'must be an https URL'],
    ['ftp://example.com/hook', 'must be an https URL'],
    ['https://user:pass@example.com/hook', 'must not carry a user name or password'],
    ['https://127.0.0.1/hook', 'resolves to 127.0.0.1'],
    ['https://localhost/hook', 'a loopback, private, link-local or metadata address'],
    ['https://10.1.2.3/hook', 'resolves to 10.1.2.3'],
    ['https://172.16.0.1/hook', 'resolves to 172.16.0.1'],
    ['https://192.168.1.1/hook', 'resolves to 192.168.1.1'],
    ['https://169.254.169.254/latest/meta-data', 'resolves to 169.254.169.254'],
    ['https://[::1]/hook', 'resolves to ::1'],
    ['https://[fd00:ec2::254]/hook', 'resolves to fd00:ec2::254'],
    ['https://[::ffff:127.0.0.1]/hook', 'a loopback, private, link-local or metadata address'],
    ['https://2130706433/hook', 'resolves to 127.0.0.1'],
    ['https://0x7f.1/hook', 'resolves to 127.0.0.1'],
    ['https://0.0.0.0/hook', 'resolves to 0.0.0.0'],
    ['not a url', 'is not a URL'],
  ])('refuses %s', async (url, why) => {
    expect(await addressGuard(strict).refusal(url)).toContain(why);
  });

  it('takes a public https address, and http and private ones only where the operator allows them', async () => {
    expect(await addressGuard(strict).refusal('https://93.184.215.14/hook')).toBeNull();
    expect(await addressGuard(strict).refusal('https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/hook')).toBeNull();
    expect(await addressGuard(loose).refusal('http://127.0.0.1:9/hook')).toBeNull();
    expect(await addressGuard({ allowHttp: true, allowPrivate: false }).refusal('http://127.0.0.1:9/hook')).toContain(
      'resolves to 127.0.0.1',
    );
    expect(isInside('8.8.8.8')).toBe(false);
    expect(isInside('100.64.0.1')).toBe(true);
  });
});

describe('the webhook sender', () => {
  it('checks the address again at each call: a loopback receiver is not called unless allowed', async () => {
    hits.length = 0;
    const refused = await post({ allowHttp: true, allowPrivate: false }, `${base}/hook`);
    expect(refused).toMatchObject({ error: expect.stringContaining('the URL is refused: its host 127.0.0.1 resolves to 127.0.0.1') });
    expect(hits).toEqual([]);
    expect(await post(loose, `${base}/hook`)).toMatchObject({ status: 204 });
    expect(hits).toEqual(['/hook']);
  });

  it('follows no redirect: a 302 is the answer, and where it points is never called', async () => {
    hits.length = 0;
    expect(await post(loose, `${base}/redirect`)).toMatchObject({ status: 302 });
    expect(hits).toEqual(['/redirect']);
  });

  it('reads at most 4 KB of an answer', async () => {
    const answer = await post(loose, `${base}/big`);
    expect(answer).toMatchObject({ status: 200 });
    expect((answer as { answer: string }).answer.length).toBe(4096);
  });

  it('says a refused connection in a few words', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    expect(await post(loose, `http://127.0.0.1:${port}/hook`)).toMatchObject({ error: 'the connection was refused' });
  });
});

describe("the tool services' client", () => {
  const dirs: string[] = [];
  afterAll(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

  /** The tool `key` served at `url`, as the registry reads it, run once through the client over `config`. */
  async function run(config: typeof strict, url: string) {
    const dir = await toolRegistryWith({ far_tool: httpTool('far_tool', url, 'n', { retries: 0 }) });
    dirs.push(dir);
    const tool = (await loadToolRegistry(dir)).get('far_tool')!;
    const handler = tool.handler as { http: string; timeout_ms: number; retries: number };
    const execute = httpExecutor(guardedFetch(config))({ url: handler.http, timeoutMs: handler.timeout_ms, retries: handler.retries });
    return execute({
      tool,
      args: { prompt: 'a kite', n: 1 },
      userId: 'u',
      agentId: null,
      sessionId: null,
      signal: new AbortController().signal,
    });
  }

  it('checks the address at each call: a tool service on loopback is not called unless the operator allows it', async () => {
    hits.length = 0;
    await expect(run({ allowHttp: true, allowPrivate: false }, `${base}/tool`)).rejects.toThrow(
      "The tool service's address is refused by this service's outbound rules",
    );
    await expect(run(strict, `${base}/tool`)).rejects.toThrow("The tool service's address is refused by this service's outbound rules");
    expect(hits).toEqual([]);
    expect(await run(loose, `${base}/tool`)).toEqual({ result: { made: 1 }, media: [] });
    expect(hits).toEqual(['/tool']);
  });

  it('follows no redirect: a 307 is a failed call, and where it points is never called', async () => {
    hits.length = 0;
    await expect(run(loose, `${base}/tool-moved`)).rejects.toThrow('The tool service answered HTTP 307');
    expect(hits).toEqual(['/tool-moved']);
  });

  it('refuses a tool file whose service is at an address the rules refuse, when the registry is loaded', async () => {
    const dir = await toolRegistryWith({ inside_tool: httpTool('inside_tool', 'https://10.0.0.7/run') });
    dirs.push(dir);
    await expect(loadToolRegistry(dir, addressGuard(strict))).rejects.toThrow(
      /inside_tool\.yaml: handler\.http: its host 10\.0\.0\.7 resolves to 10\.0\.0\.7, a loopback, private, link-local or metadata address/,
    );
    expect((await loadToolRegistry(dir, addressGuard(loose))).get('inside_tool')).toBeDefined();
    // A name that does not resolve yet is left to each call's check (a service started after this one).
    const later = await toolRegistryWith({ later_tool: httpTool('later_tool', 'https://tools.invalid/run') });
    dirs.push(later);
    expect((await loadToolRegistry(later, addressGuard(strict))).get('later_tool')).toBeDefined();
  });
});
