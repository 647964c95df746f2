import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addressGuard, isInside } from '../../src/outbound/address-guard.ts';
import { webhookSender } from '../../src/outbound/webhook-sender.ts';

// The one guard of users' URLs, and the webhook sender that checks again at each call: what is
// refused without the operator's leave, over real sockets on loopback.

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
