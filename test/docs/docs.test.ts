import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/** What a person reads: the repository's text files, and the README's map of the docs. */
const root = fileURLToPath(new URL('../../', import.meta.url));

/** The repository's files as git tracks them, with the text of each that is text (no NUL byte). */
function trackedTexts(): { path: string; text: string }[] {
  const paths = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' }).split('\0').filter(Boolean);
  return paths.flatMap((path) => {
    let bytes: Buffer;
    try {
      bytes = readFileSync(`${root}${path}`);
    } catch {
      // Deleted in the work tree and not yet committed: nothing there to read.
      return [];
    }
    return bytes.includes(0) ? [] : [{ path, text: bytes.toString('utf8') }];
  });
}

/**
 * A line a merge left: git's three markers, and the form a Markdown formatter gives the last one
 * (`>>>>>>>` read as seven nested quotes, written `> > > > > > >`), which is how one stayed in
 * docs/configuration.md.
 */
const CONFLICT = /^(<{7}|={7}|>{7}|\|{7})( |$)|^(> ?){6}>/;

describe('the documentation', () => {
  it('no text file in the repository holds a merge-conflict marker', () => {
    const texts = trackedTexts();
    expect(texts.length).toBeGreaterThan(100);
    const found = texts.flatMap(({ path, text }) =>
      text.split('\n').flatMap((line, i) => (CONFLICT.test(line) ? [`${path}:${i + 1}: ${line.slice(0, 60)}`] : [])),
    );
    expect(found).toEqual([]);
  });

  it('the marker check catches each form a merge leaves', () => {
    for (const line of ['<<<<<<< HEAD', '=======', '>>>>>>> main', '||||||| base', '> > > > > > > main', '> > > > > > > | `A` |'])
      expect(CONFLICT.test(line), line).toBe(true);
    for (const line of ['> a quote', '| `A` | `1` |', '==', '<<< not one', '> > nested quote'])
      expect(CONFLICT.test(line), line).toBe(false);
  });

  it('the README\'s "Where to read next" names every page under docs/, and every page it names exists', () => {
    const readme = readFileSync(`${root}README.md`, 'utf8');
    const start = readme.indexOf('## Where to read next');
    expect(start).toBeGreaterThan(0);
    const section = readme.slice(start, readme.indexOf('\n## ', start + 1));
    const pages = readdirSync(`${root}docs`).filter((f) => f.endsWith('.md'));
    const named = new Set([...section.matchAll(/`docs\/([\w-]+\.md)`/g)].map((m) => m[1]!));
    expect(pages.filter((p) => !named.has(p))).toEqual([]);
    expect([...named].filter((p) => !pages.includes(p))).toEqual([]);
  });
});
