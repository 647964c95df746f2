import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { SecretsConfig } from '../config.ts';
import { SealBroken, type SecretSealer } from '../domain/deployments/ports.ts';
import { type SealedKey, sealedWhat } from '../domain/deployments/sealed-keys.ts';

export type { SealedKey };

/**
 * Seals deployments' secrets with AES-256-GCM from `node:crypto`: a fresh 96-bit nonce per seal,
 * the row's id as additional authenticated data (a sealed value moved to another row does not
 * open), and the key's id in the sealed text, so several keys can open while one seals (key
 * rotation, docs/security.md). Sealed text: `v1.<key id>.<nonce>.<tag>.<ciphertext>`, base64url.
 */
const VERSION = 'v1';
const KEY_BYTES = 32;

/** Names a key without revealing anything usable about it. */
export const keyIdOf = (key: Buffer) => createHash('sha256').update('parley secrets key').update(key).digest('base64url').slice(0, 12);

interface Keys {
  /** The key that seals, first; the others only open. */
  list: Buffer[];
  /** Where they are kept, when the service keeps them itself. */
  file?: string;
}

export const NO_SHARED_KEY =
  'SECRETS_KEY is not set: with DATABASE_URL every instance must be given the same key (openssl rand -base64 32), so deployments that need secrets cannot be made or run until it is (docs/security.md)';

export function sealerOver(keys: Keys | { problem: string }): SecretSealer {
  const state = 'problem' in keys ? null : { list: keys.list, file: keys.file };
  const byId = () => new Map(state!.list.map((k) => [keyIdOf(k), k]));
  const need = () => {
    if (!state) throw new Error((keys as { problem: string }).problem);
    return state;
  };

  return {
    problem: 'problem' in keys ? keys.problem : null,

    seal(plain, boundTo) {
      const key = need().list[0]!;
      const nonce = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, nonce);
      cipher.setAAD(Buffer.from(boundTo, 'utf8'));
      const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return [
        VERSION,
        keyIdOf(key),
        nonce.toString('base64url'),
        cipher.getAuthTag().toString('base64url'),
        data.toString('base64url'),
      ].join('.');
    },

    open(sealed, boundTo) {
      need();
      const [version, id, nonce, tag, data] = sealed.split('.');
      if (version !== VERSION || !id || nonce === undefined || tag === undefined || data === undefined)
        throw new SealBroken('the secrets are not in a sealed form this service reads');
      const key = byId().get(id);
      if (!key) throw new SealBroken(`the secrets were sealed with a key this service does not have (key id ${id})`);
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(nonce, 'base64url'));
        decipher.setAAD(Buffer.from(boundTo, 'utf8'));
        decipher.setAuthTag(Buffer.from(tag, 'base64url'));
        return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
      } catch {
        throw new SealBroken('the sealed secrets were altered, or belong to another deployment');
      }
    },

    isCurrent(sealed) {
      return sealed.split('.')[1] === keyIdOf(need().list[0]!);
    },

    cannotOpen(sealed) {
      if (!state) return (keys as { problem: string }).problem;
      const [version, id] = sealed.split('.');
      if (version !== VERSION || !id) return 'the secrets are not in a sealed form this service reads';
      return byId().has(id) ? null : `the secrets were sealed with a key this service does not have (key id ${id})`;
    },

    async rotate() {
      const s = need();
      if (!s.file)
        throw new Error(
          'The key comes from SECRETS_KEY: set a new SECRETS_KEY with the old one in SECRETS_PREVIOUS_KEYS on every instance, restart them, then run `parley secrets reseal`',
        );
      const next = [randomBytes(KEY_BYTES), ...s.list];
      await writeKeyFile(s.file, next);
      s.list = next;
    },

    async forgetPrevious() {
      const s = need();
      if (!s.file) return;
      const kept = [s.list[0]!];
      await writeKeyFile(s.file, kept);
      s.list = kept;
    },
  };
}

const listSealed = (sealed: SealedKey[]) => sealed.map((s) => `${sealedWhat(s)} with key id ${s.keyId}`).join(', ');

type Log = { warn(obj: unknown, msg?: string): void };

/** Says at start which deployments no key of `keys` opens: they do not run until it is given. */
function warnOfMissingKeys(keys: Buffer[], sealed: SealedKey[], log: Log) {
  const here = new Set(keys.map(keyIdOf));
  const missing = sealed.filter((s) => !here.has(s.keyId));
  if (!missing.length) return;
  log.warn(
    { keyIds: missing.map((s) => s.keyId) },
    `deployments do not run on this instance: the secrets of ${listSealed(missing)} are sealed with a key this service does not have. ` +
      'Start it with that key (the secrets.key of the data directory they were sealed in, or SECRETS_KEY set to its first line), or deploy them again with their tokens',
  );
}

/**
 * The sealer the settings ask for: `SECRETS_KEY` (and its previous keys), else a key generated
 * once into the data directory (owner-only), else, for an in-memory database, a key of this
 * process's own (nothing sealed outlives it). `sealed` is what the database holds sealed: a key
 * is generated only where nothing is (a new key would open none of it, and hide that the old one
 * was left behind); without the key they need, the sealer says why and what to do, and the
 * deployments say it too. With a shared database and no key, a sealer that says why it cannot work.
 */
export async function loadSealer(config: SecretsConfig, log: Log, sealed: SealedKey[] = []): Promise<SecretSealer> {
  if (config.key) {
    const list = [config.key, ...config.previous];
    warnOfMissingKeys(list, sealed, log);
    return sealerOver({ list });
  }
  if (config.shared) {
    if (!sealed.length) return sealerOver({ problem: NO_SHARED_KEY });
    return sealerOver({
      problem:
        `SECRETS_KEY is not set, and the secrets of ${listSealed(sealed)} are sealed with a key: set SECRETS_KEY to that key on every instance ` +
        '(after `parley db copy`: the first line of the secrets.key in the data directory copied from), then restart (docs/deployments.md)',
    });
  }
  if (!config.keyFile) return sealerOver({ list: [randomBytes(KEY_BYTES), ...config.previous] });
  const kept = await readKeyFile(config.keyFile, log);
  if (kept) {
    const list = [...kept, ...config.previous];
    warnOfMissingKeys(list, sealed, log);
    return sealerOver({ list, file: config.keyFile });
  }
  if (sealed.length) {
    return sealerOver({
      problem:
        `${config.keyFile} is missing, and the secrets of ${listSealed(sealed)} are sealed with the key it held: copy the secrets.key of the data directory ` +
        'they come from there (mode 0600), or set SECRETS_KEY to its first line, and restart. If that key is lost, delete those deployments and ' +
        'restart (a new key is made), then deploy them again with their tokens (docs/deployments.md)',
    });
  }
  const made = [randomBytes(KEY_BYTES)];
  try {
    await mkdir(dirname(config.keyFile), { recursive: true, mode: 0o700 });
    // `wx`: of two processes starting at once, one writes the key and the other reads it.
    await writeFile(config.keyFile, keyLines(made), { mode: 0o600, flag: 'wx' });
    return sealerOver({ list: [...made, ...config.previous], file: config.keyFile });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    const raced = await readKeyFile(config.keyFile, log);
    if (!raced) throw new Error(`${config.keyFile} holds no key`);
    return sealerOver({ list: [...raced, ...config.previous], file: config.keyFile });
  }
}

const keyLines = (keys: Buffer[]) => `${keys.map((k) => k.toString('base64')).join('\n')}\n`;

/** The keys a key file holds (the sealing one first), or null for no file; one others may read is made owner-only. */
export async function readKeyFile(file: string, log: Log): Promise<Buffer[] | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
  const mode = (await stat(file)).mode & 0o777;
  if (mode & 0o077) {
    await chmod(file, 0o600);
    log.warn({ file, mode: mode.toString(8) }, 'the secrets key file was readable by others: made owner-only');
  }
  const keys = text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => Buffer.from(l, 'base64'));
  if (!keys.length || keys.some((k) => k.length !== KEY_BYTES)) throw new Error(`${file} must hold keys of 32 bytes in base64, one a line`);
  return keys;
}

/** Replaces the key file at once (a crash leaves the old file or the new one, never half of one). */
async function writeKeyFile(file: string, keys: Buffer[]) {
  const next = `${file}.next`;
  await writeFile(next, keyLines(keys), { mode: 0o600 });
  // A file left by an earlier attempt keeps its mode through writeFile: owner-only, whatever it was.
  await chmod(next, 0o600);
  await rename(next, file);
}
