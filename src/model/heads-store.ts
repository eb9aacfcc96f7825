/**
 * heads.json computed in the browser (the demo's "calibrate for WnW"), kept in the origin
 * private file system beside the cached weights (weight-cache.ts), so that the next load of
 * the same folder finds it as if heads.json were in the folder. A folder cannot be written
 * to from a page (a picked folder is read-only, a served one is the server's), hence here.
 *
 * Keyed by the folder's identity (its address or picked name, and each shard's size and
 * modification time), not by weight format: the calibration ranks heads of the model, not
 * of one packing. Files under `wnw-weights/heads/`: `<key>.json` (the heads file, written
 * last) and `<key>.partial.json` (the finished clips of a run not yet done, for resuming).
 * `clearWeightCache` removes them with the weights.
 */
import { cacheRoot, folderIdentity, keyName } from './weight-cache.js';

const DIR = 'heads';
const VERSION = 1;

/** The key of a folder's stored calibration, or null where nothing can be stored (no OPFS, or a folder whose shards cannot be told apart). */
export async function headsStoreKey(base: string): Promise<string | null> {
  const id = await folderIdentity(base);
  return id ? JSON.stringify({ v: VERSION, kind: 'heads', ...id }) : null;
}

async function entry(
  key: string,
  suffix: string,
  create: boolean,
): Promise<{ dir: FileSystemDirectoryHandle; name: string } | null> {
  const root = await cacheRoot(create);
  if (!root) return null;
  try {
    return { dir: await root.getDirectoryHandle(DIR, { create }), name: `${await keyName(key)}${suffix}` };
  } catch {
    return null;
  }
}

async function readEntry(key: string, suffix: string): Promise<unknown> {
  const e = await entry(key, suffix, false);
  if (!e) return null;
  try {
    const json = JSON.parse(await (await (await e.dir.getFileHandle(e.name)).getFile()).text()) as {
      key?: unknown;
      value?: unknown;
    };
    // A hash collision or a foreign file is not this folder's.
    return json.key === key ? (json.value ?? null) : null;
  } catch {
    return null;
  }
}

async function writeEntry(key: string, suffix: string, value: unknown): Promise<boolean> {
  const e = await entry(key, suffix, true);
  if (!e) return false;
  try {
    const w = await (await e.dir.getFileHandle(e.name, { create: true })).createWritable();
    // createWritable writes to a swap file and replaces the entry on close: a stop mid-write leaves the old one.
    await w.write(JSON.stringify({ key, value }));
    await w.close();
    return true;
  } catch {
    return false;
  }
}

async function removeEntry(key: string, suffix: string): Promise<void> {
  const e = await entry(key, suffix, false);
  await e?.dir.removeEntry(e.name).catch(() => {});
}

/** The heads file stored for the folder at `base` (parsed JSON, unchecked: the loader checks it), or null. */
export async function readStoredHeads(base: string): Promise<unknown> {
  const key = await headsStoreKey(base);
  return key ? readEntry(key, '.json') : null;
}

/** Stores a heads file for the folder at `base`; false where it cannot be stored (no OPFS, an unidentifiable folder, a full quota). */
export async function storeHeads(base: string, heads: unknown): Promise<boolean> {
  const key = await headsStoreKey(base);
  return key ? writeEntry(key, '.json', heads) : false;
}

/** Forgets the folder's stored heads file (and any unfinished run's clips). */
export async function removeStoredHeads(base: string): Promise<void> {
  const key = await headsStoreKey(base);
  if (!key) return;
  await removeEntry(key, '.json');
  await removeEntry(key, '.partial.json');
}

/** The unfinished run's finished clips for `key` (see headsStoreKey): load, save, clear. */
export function storedPartial(key: string): {
  load(): Promise<unknown>;
  save(value: unknown): Promise<void>;
  clear(): Promise<void>;
} {
  return {
    load: () => readEntry(key, '.partial.json'),
    save: async (value) => void (await writeEntry(key, '.partial.json', value)),
    clear: () => removeEntry(key, '.partial.json'),
  };
}
