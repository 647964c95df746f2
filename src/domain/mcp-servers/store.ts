/** A server as its owner sees it: never its authorization header's value. */
export interface McpServerView {
  id: string;
  userId: string;
  name: string;
  url: string;
  /** Sent with every request; names lower-cased, the authorization header never among them. */
  headers: Record<string, string>;
  /** Whether an authorization header is kept (sealed) for it. */
  hasAuthorization: boolean;
  pricePerCall: number;
  createdAt: Date;
  updatedAt: Date;
}

/** Every statement the servers' rules need. */
export interface McpServerStore {
  count(userId: string): Promise<number>;
  /** Made with its sealed authorization: the id is chosen first, since the seal is bound to it. Null: the owner has a server of that name. */
  create(row: {
    id: string;
    userId: string;
    name: string;
    url: string;
    headers: Record<string, string>;
    authorization: string | null;
    pricePerCall: number;
  }): Promise<McpServerView | null>;
  /** The owner's servers, by name. */
  list(userId: string): Promise<McpServerView[]>;
  byId(id: string): Promise<McpServerView | null>;
  /** Null: the owner has another server of the new name; 'gone': it was deleted meanwhile. `authorization` undefined keeps the one kept. */
  update(
    id: string,
    changes: { name?: string; url?: string; headers?: Record<string, string>; authorization?: string | null; pricePerCall?: number },
  ): Promise<McpServerView | null | 'gone'>;
  remove(id: string): Promise<void>;
  /** The authorization header's value, sealed, or null. */
  sealedAuthorization(id: string): Promise<string | null>;
  /** The approval rules of the owner's agents that name the server's tools (`<server>__…`), with each rule's agent. */
  approvalRulesNaming(userId: string, serverName: string): Promise<{ agent: string; tool: string }[]>;
  /** The tools enabled on an agent, each with its server. */
  enabledOn(agentId: string): Promise<{ server: McpServerView; tool: string }[]>;
}
