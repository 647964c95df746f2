/** The authenticated caller, as established from an API key. */
export interface Viewer {
  id: string;
  /** The key the caller used: connections made with it close when it is deleted. */
  keyId?: string;
  /** The user's subscription tier, which sets their rate limit. */
  tier?: string;
}
