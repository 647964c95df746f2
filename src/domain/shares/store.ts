import type { SharedPerson } from './service.ts';

/** A share as stored, with what its reader sees of the session and its owner. */
export interface StoredShare {
  id: string;
  title: string;
  public: boolean;
  createdAt: Date;
  owner: { username: string; userImage: string | null };
  /** The ordinal of the last message shared; null when the session had none finished then. */
  upTo: number | null;
  session: { id: string; title: string | null; createdAt: Date; agents: { key: string; name: string; image: string | null }[] };
}

/** A message of a share, with the reactions it had. */
export interface StoredSharedMessage {
  id: string;
  role: string;
  content: string;
  attachments: string[];
  createdAt: Date;
  sender: SharedPerson | null;
  reactions: { userId: string; reaction: string }[];
}

/** Every statement the share rules need. */
export interface ShareStore {
  share(id: string): Promise<StoredShare | null>;
  /**
   * The session's messages up to `upTo` as they were at `asOf`: finished by then (a reply still
   * being written then is left out even once it has finished) and with the reactions they had.
   */
  messagesAsOf(sessionId: string, upTo: number, asOf: Date): Promise<StoredSharedMessage[]>;
  /** The title of a session that exists (its place was just read). */
  sessionTitle(sessionId: string): Promise<string | null>;
  /** The session's message with this id if it is finished, else (no id) its latest finished one. */
  finishedMessage(sessionId: string, messageId?: string): Promise<string | null>;
  create(share: { sessionId: string; ownerId: string; messageId: string | null; title: string }): Promise<string>;
  /** Who made the share, or null for no such share. */
  ownerOf(shareId: string): Promise<string | null>;
  delete(shareId: string): Promise<void>;
}
