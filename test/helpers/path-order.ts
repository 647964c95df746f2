import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Files in the order of their paths, or the reverse of it (`TEST_FILE_ORDER=reverse`). Run in one
 * worker, the two orders put every file after every other file once: in one of them each file
 * follows the files it precedes in the other (scripts/suite-proofs.sh, `order`).
 */
export class PathOrder extends BaseSequencer {
  override async sort(files: TestSpecification[]) {
    const key = (f: TestSpecification) => relative(this.ctx.config.root, f.moduleId);
    const sorted = [...files].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
    return process.env.TEST_FILE_ORDER === 'reverse' ? sorted.reverse() : sorted;
  }
}
