/** An event longer than the reader accepts: the sender is broken or hostile. */
export class SseEventTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`an event is longer than ${limit} characters`);
  }
}

/**
 * Splits a Server-Sent Events body into the `data` of each event, handed to `onEvent` as soon as
 * its blank line arrives. Chunks may cut an event (or a UTF-8 character, or a CRLF) anywhere, so
 * text is decoded as a stream and buffered up to a blank line; an event may hold at most
 * `maxEventChars`, so a sender that never ends one cannot fill memory (`push` then throws
 * SseEventTooLarge, after handing on the events before it).
 *
 * Pushed rather than iterated: a reply arrives as one small chunk per token, and a chain of async
 * iterators between the socket and the reply costs promises and turns of the event loop for each.
 */
export class SseEventReader {
  private readonly decoder = new TextDecoder();
  private buffer = '';
  private data: string[] = [];
  private pending = 0;

  constructor(
    private readonly maxEventChars: number,
    private readonly onEvent: (data: string) => void,
  ) {}

  /** Reads a chunk of the body. A throw from `onEvent` leaves the reader and stops the chunk there. */
  push(chunk: Uint8Array) {
    this.buffer += this.decoder.decode(chunk, { stream: true });
    this.takeLines(false);
    // A line not ended yet counts too: a sender that never ends one must not grow the buffer.
    if (this.pending + this.buffer.length > this.maxEventChars) throw new SseEventTooLarge(this.maxEventChars);
  }

  /** The body ended: what is left is the last line, and an event not closed by a blank line still counts. */
  end() {
    this.buffer += this.decoder.decode();
    this.takeLines(true);
    if (this.data.length) this.onEvent(this.data.join('\n'));
    this.data = [];
  }

  private take(line: string) {
    if (line === '') {
      const event = this.data;
      this.data = [];
      this.pending = 0;
      if (event.length) this.onEvent(event.join('\n'));
    } else if (line.startsWith('data:')) {
      this.data.push(line.slice(line[5] === ' ' ? 6 : 5));
      this.pending += line.length;
      if (this.pending > this.maxEventChars) throw new SseEventTooLarge(this.maxEventChars);
    }
  }

  /** Takes the complete lines of the buffer (with `final`, the rest too). */
  private takeLines(final: boolean) {
    const buffer = this.buffer;
    let start = 0;
    // Each is searched for again only once passed, so a chunk of many lines is scanned once.
    let lf = buffer.indexOf('\n');
    let cr = buffer.indexOf('\r');
    try {
      for (;;) {
        if (lf >= 0 && lf < start) lf = buffer.indexOf('\n', start);
        if (cr >= 0 && cr < start) cr = buffer.indexOf('\r', start);
        if (cr < 0 || (lf >= 0 && lf < cr)) {
          if (lf < 0) break;
          const line = buffer.slice(start, lf);
          start = lf + 1;
          this.take(line);
        } else {
          // A CR last in the buffer may be the first half of a CRLF still on its way.
          if (cr === buffer.length - 1 && !final) break;
          const line = buffer.slice(start, cr);
          start = buffer[cr + 1] === '\n' ? cr + 2 : cr + 1;
          this.take(line);
        }
      }
      if (final && start < buffer.length) {
        const line = buffer.slice(start);
        start = buffer.length;
        this.take(line);
      }
    } finally {
      this.buffer = buffer.slice(start);
    }
  }
}
