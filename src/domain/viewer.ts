/** The authenticated caller, as established from an API key. */
export interface Viewer {
  id: string;
}
