import type { CreatorType } from '../generated/prisma/enums.ts';

/** The authenticated caller, as established from an API key. */
export interface Viewer {
  id: string;
  username: string;
  type: CreatorType;
  /** The key this request was made with. */
  apiKeyId: string;
}
