/**
 * The one clock of a rules test: it starts at the real time and moves only when the test moves
 * it, so every row's time and every rule's "now" come from the same place.
 */
export class TestClock {
  #ms = Date.now();
  now = () => new Date(this.#ms);
  advance(ms: number) {
    this.#ms += ms;
  }
}

/** Ids in the database's form are not needed by the rules; readable ones make failures easier to read. */
export function ids(prefix: string) {
  let next = 0;
  return () => `${prefix}-${++next}`;
}
