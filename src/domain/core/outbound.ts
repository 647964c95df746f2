/**
 * Addresses users give the service to call (a webhook's url, a tool service's): checked by one
 * guard, whichever feature calls them (`docs/outbound.md`). The adapter (`src/outbound/`) resolves the host, since a name can point
 * anywhere: an address on loopback, a private or link-local network, or a cloud's metadata
 * service is refused unless the operator allows it (`OUTBOUND_ALLOW_PRIVATE`), as is plain http
 * (`OUTBOUND_ALLOW_HTTP`). A caller checks when the address is given and the adapter again on
 * each call, against the address it then connects to.
 */
export interface AddressGuard {
  /**
   * Why `url` may not be called, in words for its owner, or null when it may. `unresolved: 'allow'`
   * takes a host name that cannot be resolved now (a check at start-up, where the call checks again).
   */
  refusal(url: string, options?: { unresolved?: 'allow' }): Promise<string | null>;
}

/** A call to an address given to the service (a tool service's), as `OutboundFetch` makes it. */
export interface OutboundRequest {
  method: string;
  headers: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
}

/**
 * Calls a URL through the guard: checked when called, connected to an address that passed the
 * check (a DNS answer that changed since cannot point it inside), and no redirect followed (a 3xx
 * is the answer). Rejects with `OutboundRefused` when the guard refuses the URL.
 */
export type OutboundFetch = (url: string, request: OutboundRequest) => Promise<Response>;

/** The guard refused the URL a call was to go to; `reason` in words for the operator. */
export class OutboundRefused extends Error {
  override name = 'OutboundRefused';
  constructor(readonly reason: string) {
    super(`the URL is refused: ${reason}`);
  }
}
