/**
 * Model folders the user picked from disk (a directory input, or a drop): File objects
 * keyed by their path inside the folder, addressed as `wnw-files://<id>/<path>` so that
 * every reader in files.ts serves them through the same calls as URLs and paths.
 * The files stay where they are until a reader slices the bytes it needs.
 */
import { WnwError } from '../errors.js';

const SCHEME = 'wnw-files://';
interface Folder {
  name: string;
  files: Map<string, Blob>;
  /** Bytes handed to readers so far: the page's progress readout for a folder from disk. */
  bytesRead: number;
}
const folders = new Map<string, Folder>();
let nextId = 1;

/** What a `wnw-files://` address names: its folder, and the file (null when the folder lacks it). */
export interface LocalLookup {
  folder: string;
  file: Blob | null;
  /** Records `n` bytes read from the file (for `localFolderBytes`). */
  counted(n: number): void;
}

const clean = (path: string) =>
  path
    .split('/')
    .filter((p) => p !== '' && p !== '.')
    .join('/');

/**
 * Registers a picked folder and returns its base address. `files` maps each file's path
 * inside the folder ("config.json", "sub/x.bin") to the file.
 */
export function registerLocalFolder(name: string, files: Iterable<[string, Blob]>): string {
  const id = `${nextId++}`;
  folders.set(id, { name, files: new Map([...files].map(([p, f]) => [clean(p), f])), bytesRead: 0 });
  return `${SCHEME}${id}/`;
}

/** Bytes read from a registered folder so far, and the size of all its files. */
export function localFolderBytes(base: string): { read: number; total: number } | null {
  const f = folders.get(/^wnw-files:\/\/([^/]+)/.exec(base)?.[1] ?? '');
  if (!f) return null;
  let total = 0;
  for (const b of f.files.values()) total += b.size;
  return { read: f.bytesRead, total };
}

/** A registered folder's name and files (null for any other address). */
export function localFolderFiles(base: string): { name: string; files: ReadonlyMap<string, Blob> } | null {
  const f = folders.get(/^wnw-files:\/\/([^/]+)/.exec(base)?.[1] ?? '');
  return f ? { name: f.name, files: f.files } : null;
}

/** Forgets a folder registered by `registerLocalFolder` (the Files are then free to be collected). */
export function releaseLocalFolder(base: string): void {
  const m = /^wnw-files:\/\/([^/]+)/.exec(base);
  if (m) folders.delete(m[1]);
}

/**
 * Picked files as a folder: each File's `webkitRelativePath` ("model/config.json") less
 * the top directory the user chose, or its name when the browser gives no path.
 * Returns the folder's name and its files keyed by path inside it.
 */
export function filesToFolder(list: Iterable<File>): { name: string; files: [string, File][] } {
  const files: [string, File][] = [];
  let name = '';
  for (const f of list) {
    const rel = (f as File & { webkitRelativePath?: string }).webkitRelativePath || f.name;
    const parts = rel.split('/');
    if (parts.length > 1) name ||= parts[0];
    files.push([parts.length > 1 ? parts.slice(1).join('/') : rel, f]);
  }
  return { name: name || 'chosen files', files };
}

/** The picked file behind `source`; undefined when `source` is not a `wnw-files://` address. */
export function localFile(source: string): LocalLookup | undefined {
  if (!source.startsWith(SCHEME)) return undefined;
  const rest = source.slice(SCHEME.length);
  const slash = rest.indexOf('/');
  const id = slash < 0 ? rest : rest.slice(0, slash);
  const folder = folders.get(id);
  const path = clean(slash < 0 ? '' : rest.slice(slash + 1));
  return {
    folder: folder?.name ?? `a folder no longer open (${id})`,
    file: folder?.files.get(path) ?? null,
    counted: (n) => folder && (folder.bytesRead += n),
  };
}

/** A folder picked from disk, registered for this page's loads. */
export interface LocalFolder {
  /** What `LoadOptions.model` and `inspectModel` take: the folder's `wnw-files://` address, valid in this page only. */
  model: string;
  name: string;
  files: number;
  /** The size of all its files. */
  bytes: number;
}

/**
 * The part of a directory handle a walk needs: TypeScript's DOM library leaves a handle's
 * async iteration to DOM.AsyncIterable, which not every consumer's configuration has.
 */
interface WalkableDirectory {
  readonly kind: 'directory';
  readonly name: string;
  values(): AsyncIterable<
    WalkableDirectory | { readonly kind: 'file'; readonly name: string; getFile(): Promise<File> }
  >;
}

/** Every file under a directory handle, keyed by its path inside it. */
async function directoryFiles(dir: WalkableDirectory, prefix = ''): Promise<[string, File][]> {
  const out: [string, File][] = [];
  for await (const entry of dir.values()) {
    const path = `${prefix}${entry.name}`;
    if (entry.kind === 'file') out.push([path, await entry.getFile()]);
    else out.push(...(await directoryFiles(entry, `${path}/`)));
  }
  return out;
}

/**
 * Registers a folder the user picked, as a directory handle (`showDirectoryPicker()`, a
 * drop's `getAsFileSystemHandle()`) or the Files of `<input type="file" webkitdirectory>`.
 * Nothing is read until a load or `inspectModel` asks; `releaseLocalFolder(model)` forgets
 * it. The address is this page's: a worker does not share the Files, so a picked folder
 * loads with `loadTranscriber`, not `loadTranscriberInWorker`.
 */
export async function openLocalFolder(picked: FileSystemDirectoryHandle | Iterable<File>): Promise<LocalFolder> {
  const handle = picked as Partial<WalkableDirectory> | null;
  const isDirectory = handle?.kind === 'directory' && typeof handle.values === 'function';
  if (!isDirectory && typeof (picked as Partial<Iterable<File>> | null)?.[Symbol.iterator] !== 'function')
    throw new WnwError(
      'BAD_ARGUMENT',
      'openLocalFolder takes a directory handle (showDirectoryPicker()) or the Files of a directory input; pick the model folder itself',
    );
  const { name, files } = isDirectory
    ? { name: handle!.name!, files: await directoryFiles(handle as WalkableDirectory) }
    : filesToFolder(picked as Iterable<File>);
  return {
    model: registerLocalFolder(name, files),
    name,
    files: files.length,
    bytes: files.reduce((a, [, f]) => a + f.size, 0),
  };
}
