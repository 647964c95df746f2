/** An event longer than the reader accepts: the sender is broken or hostile. */
export class SseEventTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`an event is longer than ${limit} characters`);
  }
}

/**
 * Splits a Server-Sent Events body into the `data` of each event. Chunks may cut an event (or a
 * UTF-8 character, or a CRLF) anywhere, so text is decoded as a stream and buffered up to a blank
 * line; an event may hold at most `maxEventChars`, so a sender that never ends one cannot fill
 * memory. A reply arrives as one small chunk per token: each chunk is split with plain string
 * searches and its events handed on from an array, without a generator per line.
 */
export async function* sseData(body: AsyncIterable<Uint8Array>, maxEventChars: number): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string[] = [];
  let pending = 0;
  let tooLarge = false;
  const ready: string[] = [];

  const take = (line: string) => {
    if (line === '') {
      if (data.length) ready.push(data.join('\n'));
      data = [];
      pending = 0;
    } else if (line.startsWith('data:')) {
      data.push(line.slice(line[5] === ' ' ? 6 : 5));
      pending += line.length;
      if (pending > maxEventChars) tooLarge = true;
    }
  };
  /** Takes the complete lines of the buffer (with `final`, the rest too), until an event is too large. */
  const takeLines = (final: boolean) => {
    let start = 0;
    // Each is searched for again only once passed, so a chunk of many lines is scanned once.
    let lf = buffer.indexOf('\n');
    let cr = buffer.indexOf('\r');
    while (!tooLarge) {
      if (lf >= 0 && lf < start) lf = buffer.indexOf('\n', start);
      if (cr >= 0 && cr < start) cr = buffer.indexOf('\r', start);
      if (cr < 0 || (lf >= 0 && lf < cr)) {
        if (lf < 0) break;
        take(buffer.slice(start, lf));
        start = lf + 1;
      } else {
        // A CR last in the buffer may be the first half of a CRLF still on its way.
        if (cr === buffer.length - 1 && !final) break;
        take(buffer.slice(start, cr));
        start = buffer[cr + 1] === '\n' ? cr + 2 : cr + 1;
      }
    }
    buffer = buffer.slice(start);
    if (final && buffer && !tooLarge) {
      take(buffer);
      buffer = '';
    }
  };

  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    takeLines(false);
    for (const event of ready.splice(0)) yield event;
    // A line not ended yet counts too: a sender that never ends one must not grow the buffer.
    if (tooLarge || pending + buffer.length > maxEventChars) throw new SseEventTooLarge(maxEventChars);
  }
  buffer += decoder.decode();
  takeLines(true);
  for (const event of ready.splice(0)) yield event;
  if (tooLarge) throw new SseEventTooLarge(maxEventChars);
  if (data.length) yield data.join('\n');
}
