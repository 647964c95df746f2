/** An event longer than the reader accepts: the sender is broken or hostile. */
export class SseEventTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`an event is longer than ${limit} characters`);
  }
}

/**
 * Splits a Server-Sent Events body into the `data` of each event. Chunks may cut an event (or a
 * UTF-8 character) anywhere, so text is decoded as a stream and buffered up to a blank line; an
 * event may hold at most `maxEventChars`, so a sender that never ends one cannot fill memory.
 */
export async function* sseData(body: AsyncIterable<Uint8Array>, maxEventChars: number): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string[] = [];
  let pending = 0;
  const lines = function* (final: boolean) {
    let nl: number;
    while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + (buffer[nl] === '\r' && buffer[nl + 1] === '\n' ? 2 : 1));
      yield line;
    }
    if (final && buffer) {
      yield buffer;
      buffer = '';
    }
  };
  const take = function* (line: string) {
    if (line === '') {
      if (data.length) yield data.join('\n');
      data = [];
      pending = 0;
    } else if (line.startsWith('data:')) {
      data.push(line.slice(line[5] === ' ' ? 6 : 5));
      pending += line.length;
      if (pending > maxEventChars) throw new SseEventTooLarge(maxEventChars);
    }
  };
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    for (const line of lines(false)) yield* take(line);
    // A line not ended yet counts too: a sender that never ends one must not grow the buffer.
    if (pending + buffer.length > maxEventChars) throw new SseEventTooLarge(maxEventChars);
  }
  buffer += decoder.decode();
  for (const line of lines(true)) yield* take(line);
  if (data.length) yield data.join('\n');
}
