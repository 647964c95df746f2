import { lookup } from 'node:dns/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { Readable } from 'node:stream';
import type { OutboundConfig } from '../config.ts';
import { type AddressGuard, type OutboundFetch, OutboundRefused } from '../domain/core/outbound.ts';

/**
 * Addresses a user's URL may not reach unless the operator allows it: this host and its
 * networks, link-local (where clouds serve instance metadata: 169.254.169.254, fd00:ec2::254),
 * private and shared ranges, and what is not an address of one host.
 */
const inside = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  inside.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
] as const)
  inside.addSubnet(net, prefix, 'ipv6');

/** Whether `address` lies inside; an IPv4 address written as IPv6 (`::ffff:127.0.0.1`) as its IPv4 self. */
export function isInside(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return isInside(mapped[1]!);
  const family = isIP(address);
  if (family === 4) return inside.check(address, 'ipv4');
  if (family === 6) return inside.check(address, 'ipv6') || /^::ffff:/i.test(address);
  return true;
}

export interface Checked {
  url: URL;
  /** The addresses the host resolved to, each allowed: a call connects to one of these and no other. */
  addresses: { address: string; family: number }[];
}

/**
 * Why `raw` may not be called, or the URL and the addresses it may be reached at. A host that
 * cannot be resolved is refused with `unresolved` set (a caller checking ahead may let it pass).
 */
export async function checkAddress(raw: string, config: OutboundConfig): Promise<{ refusal: string; unresolved?: true } | Checked> {
  if (!URL.canParse(raw)) return { refusal: 'is not a URL' };
  const url = new URL(raw);
  const schemes = config.allowHttp ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(url.protocol)) return { refusal: config.allowHttp ? 'must be an http or https URL' : 'must be an https URL' };
  if (url.username || url.password) return { refusal: 'must not carry a user name or password' };
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: { address: string; family: number }[];
  if (isIP(host)) addresses = [{ address: host, family: isIP(host) }];
  else {
    try {
      addresses = await lookup(host, { all: true, verbatim: true });
    } catch {
      return { refusal: `its host ${host} cannot be resolved`, unresolved: true };
    }
  }
  if (!config.allowPrivate) {
    const refused = addresses.find((a) => isInside(a.address));
    if (refused) return { refusal: `its host ${host} resolves to ${refused.address}, a loopback, private, link-local or metadata address` };
  }
  if (!addresses.length) return { refusal: `its host ${host} cannot be resolved`, unresolved: true };
  return { url, addresses };
}

/** The guard every feature that calls a user's URL shares. */
export const addressGuard = (config: OutboundConfig): AddressGuard => ({
  async refusal(url, options) {
    const checked = await checkAddress(url, config);
    if (!('refusal' in checked)) return null;
    return checked.unresolved && options?.unresolved === 'allow' ? null : checked.refusal;
  },
});

/** A connection's name lookup that answers the address that passed the check, whatever DNS says now. */
export function pinnedLookup(checked: Checked): LookupFunction {
  const pinned = checked.addresses[0]!;
  return (_host, options, callback) => (options.all ? callback(null, [pinned] as never) : callback(null, pinned.address, pinned.family));
}

/** An answer's headers as the fetch API's, each repeated header kept. */
function headersOf(response: IncomingMessage): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(response.headers)) {
    for (const one of Array.isArray(value) ? value : value === undefined ? [] : [value]) headers.append(name, one);
  }
  return headers;
}

/**
 * Calls through the guard (`OutboundFetch`): Node's own HTTP client rather than `fetch`, since a
 * connection's lookup can be pinned there and nothing is followed; the answer is read as `fetch`'s
 * (a stream of its body), so a caller reads a guarded call as any other.
 */
export const guardedFetch =
  (config: OutboundConfig): OutboundFetch =>
  async (url, { method, headers, body, signal }) => {
    const checked = await checkAddress(url, config);
    if ('refusal' in checked) throw new OutboundRefused(checked.refusal);
    const request = checked.url.protocol === 'https:' ? httpsRequest : httpRequest;
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const length = body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) };
      const req = request(checked.url, { method, headers: { ...headers, ...length }, lookup: pinnedLookup(checked), agent: false, signal });
      req.on('response', resolve);
      req.on('error', reject);
      req.end(body);
    });
    const status = response.statusCode ?? 502;
    const empty = [204, 205, 304].includes(status) || method === 'HEAD';
    if (empty) response.resume();
    return new Response(empty ? null : (Readable.toWeb(response) as ReadableStream<Uint8Array>), {
      status,
      statusText: response.statusMessage,
      headers: headersOf(response),
    });
  };
