import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SealBroken } from '../../src/domain/deployments/ports.ts';
import { loadSealer, NO_SHARED_KEY } from '../../src/secrets/keyring.ts';

const token = '7012345678:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw';
const warnings: unknown[] = [];
const log = { warn: (obj: unknown) => warnings.push(obj) };
const dirs: string[] = [];
const dataDir = async () => {
  const dir = await mkdtemp(join(tmpdir(), 'parley-keys-'));
  dirs.push(dir);
  return dir;
};
const settings = (over: Partial<Parameters<typeof loadSealer>[0]> = {}) => ({
  key: undefined,
  previous: [],
  keyFile: undefined,
  shared: false,
  ...over,
});

afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe('sealed secrets', () => {
  it('open only on the row they were sealed for, only unaltered, and hold nothing of the token in clear', async () => {
    const sealer = await loadSealer(settings({ key: randomBytes(32) }), log);
    const sealed = sealer.seal(JSON.stringify({ telegram: { token } }), 'deployment-1');
    expect(sealed).not.toContain(token.split(':')[1]);
    expect(sealed).not.toContain(Buffer.from(token).toString('base64').slice(0, 16));
    expect(JSON.parse(sealer.open(sealed, 'deployment-1'))).toEqual({ telegram: { token } });
    // Sealing twice gives two texts (a fresh nonce each time).
    expect(sealer.seal('same', 'd')).not.toBe(sealer.seal('same', 'd'));
    expect(() => sealer.open(sealed, 'deployment-2')).toThrow(SealBroken);
    const parts = sealed.split('.');
    const flipped = Buffer.from(parts[4]!, 'base64url');
    flipped[0]! ^= 1;
    parts[4] = flipped.toString('base64url');
    expect(() => sealer.open(parts.join('.'), 'deployment-1')).toThrow(SealBroken);
    // Another key opens nothing, and says it has not the key, not what the secret is.
    const other = await loadSealer(settings({ key: randomBytes(32) }), log);
    expect(() => other.open(sealed, 'deployment-1')).toThrow(/a key this service does not have/);
  });

  it('with a shared database and no SECRETS_KEY, nothing is sealed, and the reason says what to set', async () => {
    const sealer = await loadSealer(settings({ shared: true }), log);
    expect(sealer.problem).toBe(NO_SHARED_KEY);
    expect(() => sealer.seal('x', 'd')).toThrow(/SECRETS_KEY is not set/);
  });

  it('with SECRETS_KEY, rotation is refused with what to do instead; previous keys open what they sealed', async () => {
    const [a, b] = [randomBytes(32), randomBytes(32)];
    const before = await loadSealer(settings({ key: a }), log);
    const sealed = before.seal('token', 'd1');
    await expect(before.rotate()).rejects.toThrow(/SECRETS_PREVIOUS_KEYS.*then run `parley secrets reseal`/);
    const after = await loadSealer(settings({ key: b, previous: [a] }), log);
    expect(after.open(sealed, 'd1')).toBe('token');
    expect(after.isCurrent(sealed)).toBe(false);
    expect(after.isCurrent(after.seal('token', 'd1'))).toBe(true);
  });
});

describe('the key generated into the data directory', () => {
  it('is made once, owner-only, and read again by the next process', async () => {
    const keyFile = join(await dataDir(), 'nested', 'secrets.key');
    const first = await loadSealer(settings({ keyFile }), log);
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    const sealed = first.seal('secret', 'd1');
    const again = await loadSealer(settings({ keyFile }), log);
    expect(again.open(sealed, 'd1')).toBe('secret');
    expect(again.isCurrent(sealed)).toBe(true);
  });

  it('made readable by others is made owner-only again, with a warning', async () => {
    const keyFile = join(await dataDir(), 'secrets.key');
    await loadSealer(settings({ keyFile }), log);
    await chmod(keyFile, 0o644);
    warnings.length = 0;
    await loadSealer(settings({ keyFile }), log);
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    expect(warnings).toHaveLength(1);
  });

  it('refuses a file that holds no 32-byte key', async () => {
    const keyFile = join(await dataDir(), 'secrets.key');
    await writeFile(keyFile, 'c2hvcnQ=\n', { mode: 0o600 });
    await expect(loadSealer(settings({ keyFile }), log)).rejects.toThrow(/keys of 32 bytes/);
  });

  it('rotates: a new key seals, the old one still opens until it is forgotten', async () => {
    const keyFile = join(await dataDir(), 'secrets.key');
    const sealer = await loadSealer(settings({ keyFile }), log);
    const old = sealer.seal('before', 'd1');
    const oldFile = await readFile(keyFile, 'utf8');
    await sealer.rotate();
    expect((await readFile(keyFile, 'utf8')).split('\n').filter(Boolean)).toHaveLength(2);
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    expect(sealer.isCurrent(old)).toBe(false);
    const resealed = sealer.seal(sealer.open(old, 'd1'), 'd1');
    expect(sealer.isCurrent(resealed)).toBe(true);
    await sealer.forgetPrevious();
    const kept = await readFile(keyFile, 'utf8');
    expect(kept.split('\n').filter(Boolean)).toHaveLength(1);
    expect(kept).not.toContain(oldFile.trim());
    expect(() => sealer.open(old, 'd1')).toThrow(SealBroken);
    // The next process reads the new key alone.
    expect((await loadSealer(settings({ keyFile }), log)).open(resealed, 'd1')).toBe('before');
  });
});
