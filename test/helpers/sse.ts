/** A Server-Sent Events client over fetch, as an integration would read a stream. */
export interface SseEvent {
  id?: string;
  data: string;
}

export interface SseFrame {
  id?: number;
  event: string;
  data: any;
}

export interface SseClient {
  status: number;
  headers: Headers;
  /** Every frame received so far but those set apart by name, parsed (`data` JSON). */
  frames: SseFrame[];
  /** Every named frame (an `event:` line) received so far, by name, in order: what an EventSource hands that name's listeners. */
  named: { name: string; data: any }[];
  /** Comment lines (heartbeats) received. */
  comments: number;
  /** Resolves when a frame matching `predicate` has arrived (or rejects when the stream ends first). */
  waitFor(predicate: (f: SseFrame) => boolean): Promise<SseFrame>;
  /** Resolves with all frames when the server ends the stream. */
  done: Promise<SseFrame[]>;
  close(): void;
}

/**
 * Opens a stream and reads its frames. `apart` names events kept only in `named`: a REST stream
 * that sends the original's named frames beside its own (`task-update` on /v2/tasks/events)
 * leaves `frames` with its own. A named frame of any other name (GraphQL over SSE's `next` and
 * `complete`) is in both.
 */
export async function openSse(url: string, init: RequestInit = {}, { apart = [] as string[] } = {}): Promise<SseClient> {
  const controller = new AbortController();
  const response = await fetch(url, { ...init, signal: controller.signal });
  const frames: SseFrame[] = [];
  const waiters = new Set<{ predicate: (f: SseFrame) => boolean; resolve: (f: SseFrame) => void; reject: (e: Error) => void }>();
  const client: SseClient = {
    status: response.status,
    headers: response.headers,
    frames,
    named: [],
    comments: 0,
    waitFor(predicate) {
      const found = frames.find(predicate);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        if (ended) return reject(new Error(`stream ended without the frame; ${describe()}`));
        waiters.add({ predicate, resolve, reject });
      });
    },
    done: Promise.resolve([]),
    close: () => controller.abort(),
  };
  let ended = false;
  /** The end of what arrived, for failure messages. */
  const describe = () =>
    `${frames.length} frames, ending ${JSON.stringify(frames.slice(-3).map((f) => (f.event === 'update' ? f.data.data.type : f.data)))}`;
  const finish = () => {
    ended = true;
    for (const w of waiters) w.reject(new Error(`stream ended without the frame; ${describe()}`));
    waiters.clear();
  };
  client.done = (async () => {
    if (!response.body || !response.headers.get('content-type')?.startsWith('text/event-stream')) {
      finish();
      return frames;
    }
    const decoder = new TextDecoder();
    // The text of the frame being read, in the pieces it arrived in: a large frame comes in many
    // chunks, and appending each to one string that is then searched would copy the whole frame
    // at every chunk (quadratic; seconds for a few megabytes on a busy machine). `last` is the
    // final character held, so that a blank line split across two chunks is still found.
    let pieces: string[] = [];
    let last = '';
    const read = (block: string) => {
      let id: number | undefined;
      let name: string | undefined;
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) client.comments++;
        else if (line.startsWith('id: ')) id = Number(line.slice(4));
        else if (line.startsWith('event: ')) name = line.slice(7);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
      }
      if (!data.length) return;
      const parsed = JSON.parse(data.join('\n'));
      if (name !== undefined) {
        client.named.push({ name, data: parsed });
        if (apart.includes(name)) return;
      }
      const frame: SseFrame = { id, event: parsed.event, data: parsed };
      frames.push(frame);
      for (const w of [...waiters]) {
        if (w.predicate(frame)) {
          waiters.delete(w);
          w.resolve(frame);
        }
      }
    };
    try {
      for await (const chunk of response.body) {
        const text = decoder.decode(chunk, { stream: true });
        if (!text) continue;
        pieces.push(text);
        if (!(last + text).includes('\n\n')) {
          last = text.at(-1)!;
          continue;
        }
        const buffer = pieces.join('');
        let start = 0;
        let end: number;
        while ((end = buffer.indexOf('\n\n', start)) >= 0) {
          read(buffer.slice(start, end));
          start = end + 2;
        }
        const rest = buffer.slice(start);
        pieces = rest ? [rest] : [];
        last = rest.at(-1) ?? '';
      }
    } catch (e) {
      if ((e as Error).name !== 'AbortError') throw e;
    } finally {
      finish();
    }
    return frames;
  })();
  // A stream cut by a server that dies rejects `done`; a test that reads it later still sees the
  // rejection, and one that never reads it does not leave it unhandled.
  client.done.catch(() => {});
  return client;
}

/** The `data.data` of update frames: the events, in order. */
export const updates = (frames: SseFrame[]) => frames.filter((f) => f.event === 'update').map((f) => ({ ...f.data.data, _id: f.id }));
