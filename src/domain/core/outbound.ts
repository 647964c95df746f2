/**
 * Addresses users give the service to call (a webhook's url): checked by one guard, whichever
 * feature calls them. The adapter (`src/outbound/`) resolves the host, since a name can point
 * anywhere: an address on loopback, a private or link-local network, or a cloud's metadata
 * service is refused unless the operator allows it (`OUTBOUND_ALLOW_PRIVATE`), as is plain http
 * (`OUTBOUND_ALLOW_HTTP`). A caller checks when the address is given and the adapter again on
 * each call, against the address it then connects to.
 */
export interface AddressGuard {
  /** Why `url` may not be called, in words for its owner, or null when it may. */
  refusal(url: string): Promise<string | null>;
}
