import { newId } from '../core/ids.ts';
import { mannaOf } from '../core/manna.ts';
import { mediaLink } from '../core/media-links.ts';
import type { MediaStore } from '../media/store.ts';
import { type MediaOutput, ToolError } from '../tools/executors/types.ts';
import type { McpToolSource, OfferedTool, ReportProgress, RunnableTool } from '../tools/ports.ts';
import { type McpCallResult, type McpClients, type McpEndpoint, McpServerFailed, type McpTool } from './ports.ts';
import type { McpServerStore, McpServerView } from './store.ts';

/** The images a call's answer may keep as creations (the media route serves them by their extension). */
const IMAGE_TYPES: Record<string, string> = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/gif': 'gif', 'image/webp': 'webp' };
/** The most images one call keeps; more are left out and the model told so. */
export const MOST_IMAGES = 8;

/**
 * The name the model calls a server's tool by: `<server>__<tool>`, in the characters and the
 * length (64) chat APIs take for a function's name. Server names are one per owner, so the
 * prefix keeps two servers' tools apart (and apart from registry tools, whose keys hold no `__`).
 */
export const functionName = (server: string, tool: string) => `${server}__${tool.replace(/[^A-Za-z0-9_-]/g, '_')}`.slice(0, 64);

/** The model's arguments as an object, or why they are not one. */
function parseArgs(raw: string): { args: Record<string, unknown> } | { error: string } {
  let value: unknown;
  try {
    value = raw.trim() === '' ? {} : JSON.parse(raw);
  } catch {
    return { error: 'The arguments are not valid JSON' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { error: 'The arguments must be a JSON object' };
  return { args: value as Record<string, unknown> };
}

/** A call's images kept as files, to become the user's creations when the call is settled. */
async function keepImages(media: MediaStore, images: McpCallResult['images'], name: string): Promise<MediaOutput[]> {
  const kept: MediaOutput[] = [];
  for (const image of images.slice(0, MOST_IMAGES)) {
    const extension = IMAGE_TYPES[image.mimeType];
    const data = Buffer.from(image.data, 'base64');
    if (!extension || data.length === 0) continue;
    const id = newId();
    const file = `${id}.${extension}`;
    await media.write(file, data);
    kept.push({ id, name, url: mediaLink(file), thumbnail: null, filename: file, mediaAttributes: { mimeType: image.mimeType } });
  }
  return kept;
}

/** How long a server whose tools could not be listed is left out of replies before one asks it again. */
export const UNREACHABLE_FOR_MS = 30_000;

interface AgentToolsDeps {
  store: Pick<McpServerStore, 'enabledOn'>;
  endpointOf(server: McpServerView): Promise<McpEndpoint>;
  clients: McpClients;
  media: MediaStore;
  log: { warn?(obj: unknown, msg?: string): void; error(obj: unknown, msg?: string): void };
  /** How long a reply waits for a server's list of tools before it starts without them (the listing goes on, for the next reply). */
  offerWaitMs: number;
}

/** A server's tools as listed, and how to reach it for their calls. */
interface Listed {
  endpoint: McpEndpoint;
  listed: McpTool[];
}

/** A server's list of tools as replies wait for it: one listing at a time, and a failure remembered a while. */
interface Listing {
  version: number;
  /** Null when it failed. */
  done: Promise<Listed | null>;
  /** Set once a reply gave up waiting for it: the replies after it do not wait for it again. */
  late: boolean;
  failedUntil?: number;
}

/**
 * The tools of their MCP servers agents' owners enabled on them, as replies offer and run them
 * (`docs/mcp.md`): the tools the servers list now (a tool a server no longer lists is not
 * offered; a server out of reach offers none, and the reply goes on), each priced at its
 * server's price per call, its arguments checked against its input schema before anything is
 * held, its answer's text and images given back, and a tool's error or a server's failure a
 * failure the model is told with the reason.
 */
export function mcpAgentTools(deps: AgentToolsDeps): McpToolSource {
  const { clients, media } = deps;

  function runnable(server: McpServerView, endpoint: McpEndpoint, tool: McpTool, name: string): RunnableTool {
    return {
      key: name,
      check(raw) {
        const parsed = parseArgs(raw);
        if ('error' in parsed) return parsed;
        const problem = clients.check(tool, parsed.args);
        return problem ? { error: `The arguments do not fit the tool's input schema: ${problem}` } : parsed;
      },
      cost: () => mannaOf(server.pricePerCall),
      async execute({ args, signal, progress }) {
        const answer = await callTool(server, endpoint, tool, args, signal, progress);
        if (answer.isError) throw new ToolError(`The tool ${tool.name} failed: ${answer.text.slice(0, 2000) || 'it gave no reason'}`);
        const images = await keepImages(media, answer.images, tool.title ?? name);
        const left = answer.images.length - images.length;
        return {
          result: {
            text: answer.text,
            ...(images.length ? { images: images.map((m) => ({ creationId: m.id, url: m.url })) } : {}),
            ...(left > 0 ? { note: `${left} image(s) not kept (more than ${MOST_IMAGES}, or not PNG, JPEG, GIF or WebP)` } : {}),
          },
          media: images,
        };
      },
    };
  }

  async function callTool(
    server: McpServerView,
    endpoint: McpEndpoint,
    tool: McpTool,
    args: Record<string, unknown>,
    signal: AbortSignal,
    progress: ReportProgress,
  ) {
    try {
      return await clients.call(endpoint, tool.name, args, {
        signal,
        onProgress: (p) => progress(p.total ? Math.min(1, Math.max(0, p.progress / p.total)) : null, p.message ?? undefined),
      });
    } catch (e) {
      if (e instanceof McpServerFailed) throw new ToolError(`The MCP server ${server.name} failed: ${e.message}`);
      throw e;
    }
  }

  const warn = (obj: unknown, msg: string) => (deps.log.warn ?? deps.log.error)(obj, msg);
  const listings = new Map<string, Listing>();

  /**
   * The server's tools, listed once for every reply that starts meanwhile (the clients keep the
   * list for MCP_TOOLS_TTL_S). Only the first reply waits for a listing that is late, and a
   * failure is remembered for UNREACHABLE_FOR_MS: a server that is down or hangs costs one reply
   * its wait, not each of them.
   */
  function listingOf(server: McpServerView): Listing {
    const version = server.updatedAt.getTime();
    const known = listings.get(server.id);
    if (known?.version === version && (known.failedUntil === undefined || Date.now() < known.failedUntil)) return known;
    for (const [id, old] of listings) if (old.failedUntil !== undefined && Date.now() >= old.failedUntil) listings.delete(id);
    const listing: Listing = { version, done: Promise.resolve(null), late: false };
    listing.done = (async () => {
      try {
        const endpoint = await deps.endpointOf(server);
        const listed = await clients.tools(endpoint);
        if (listings.get(server.id) === listing) listings.delete(server.id);
        return { endpoint, listed };
      } catch (err) {
        listing.failedUntil = Date.now() + UNREACHABLE_FOR_MS;
        warn({ err, server: server.id }, 'an MCP server’s tools are not offered in replies for a while');
        return null;
      }
    })();
    listings.set(server.id, listing);
    return listing;
  }

  /** One server's enabled tools that it lists now; none when it cannot be reached, or not in time. */
  async function offersOf(server: McpServerView, names: string[]): Promise<OfferedTool[]> {
    const listing = listingOf(server);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), listing.late ? 0 : deps.offerWaitMs)));
    const got = await Promise.race([listing.done, late]);
    clearTimeout(timer);
    if (got === 'late' && !listing.late) {
      listing.late = true;
      warn({ server: server.id, waitedMs: deps.offerWaitMs }, 'an MCP server’s tools are not offered in replies: not listed in time');
    }
    if (!got || got === 'late') return [];
    const { endpoint, listed } = got;
    return names.flatMap((wanted) => {
      const tool = listed.find((t) => t.name === wanted);
      if (!tool) return [];
      const name = functionName(server.name, tool.name);
      const description = tool.description || tool.title || tool.name;
      const chat = { type: 'function' as const, function: { name, description, parameters: tool.inputSchema } };
      return [{ chat, tool: runnable(server, endpoint, tool, name) }];
    });
  }

  return {
    async forAgent(agentId) {
      const enabled = await deps.store.enabledOn(agentId);
      const byServer = new Map<string, { server: McpServerView; names: string[] }>();
      for (const { server, tool } of enabled) {
        const entry = byServer.get(server.id) ?? { server, names: [] };
        entry.names.push(tool);
        byServer.set(server.id, entry);
      }
      const offers = await Promise.all([...byServer.values()].map(({ server, names }) => offersOf(server, names)));
      const all = new Map<string, OfferedTool>();
      // Two tools whose names come to the same function name: the first keeps it.
      for (const offer of offers.flat()) if (!all.has(offer.chat.function.name)) all.set(offer.chat.function.name, offer);
      return all;
    },
  };
}
