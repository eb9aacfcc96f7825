/**
 * Byte ranges of a model file delivered in bounded pieces, so that a multi-GB tensor can go
 * from its file to the GPU without the page ever holding it whole: an HTTP `Range` request
 * read through its body reader (a server that ignores Range is streamed and only the range
 * kept), a picked file's `Blob.slice`, or a Node file handle's reads.
 *
 * Every piece but the last of a range is exactly `pieceBytes` long (a multiple of 4, so
 * each can be a `queue.writeBuffer` at a 4-byte aligned offset), whatever sizes the
 * transport delivers; the piece's memory is one buffer reused from piece to piece, so a
 * sink copies out what it keeps before it returns (writeBuffer does). A range that ends
 * short fails with a ModelLoadError naming the file, a cancel with a CancelledError.
 */
import { CancelledError, ModelLoadError } from '../errors.js';
import { isNode, nodeHost } from '../platform/host.js';
import { localFile } from './local-folder.js';

/** The default piece: large enough that per-call costs vanish, small enough to be nothing beside the weights. */
export const PIECE_BYTES = 4 << 20;

export interface StreamOptions {
  /** Bytes per piece (a positive multiple of 4); default PIECE_BYTES. */
  pieceBytes?: number;
  signal?: AbortSignal;
}

/**
 * Receives bytes [at, at + piece.byteLength) of the range, in order. `piece` is reused once
 * the sink returns (or its promise settles); a throw ends the stream with that error.
 */
export type PieceSink = (piece: Uint8Array<ArrayBuffer>, at: number) => void | Promise<void>;

/** A file whose byte ranges can be streamed, any number of times. */
export interface StreamedFile {
  readonly source: string;
  stream(offset: number, length: number, sink: PieceSink, opts?: StreamOptions): Promise<void>;
}

const isUrl = (s: string) => /^(https?|blob|data):/.test(s);

function checkPiece(pieceBytes: number): number {
  if (!(Number.isInteger(pieceBytes) && pieceBytes > 0 && pieceBytes % 4 === 0))
    throw new RangeError(`pieceBytes must be a positive multiple of 4, got ${pieceBytes}`);
  return pieceBytes;
}

function checkRange(source: string, offset: number, length: number, size?: number): void {
  if (!(Number.isInteger(offset) && Number.isInteger(length) && offset >= 0 && length >= 0))
    throw new RangeError(`${source}: bad range ${offset}..${offset + length}`);
  if (size !== undefined && offset + length > size)
    throw new ModelLoadError(
      source,
      `ends at byte ${size}, the range ${offset}..${offset + length} is outside it: truncated`,
    );
}

function stopIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new CancelledError();
}

function short(source: string, offset: number, length: number, got: number): ModelLoadError {
  return new ModelLoadError(
    source,
    `ends ${length - got} bytes short of the range ${offset}..${offset + length} (byte ${offset + got}): truncated`,
  );
}

const cannotRead = (source: string, e: unknown, hint = '') =>
  new ModelLoadError(source, `cannot read the file (${e instanceof Error ? e.message : String(e)})${hint}`);

/**
 * Coalesces bytes arriving in chunks of any size into pieces of exactly `pieceBytes` (the
 * last one shorter), handed to `sink` from one reused buffer.
 */
export class PieceWriter {
  private readonly buf: Uint8Array<ArrayBuffer>;
  private fill = 0;
  /** Bytes handed to the sink so far. */
  done = 0;

  constructor(
    private readonly sink: PieceSink,
    pieceBytes: number,
  ) {
    this.buf = new Uint8Array(checkPiece(pieceBytes));
  }

  /** Bytes taken so far, handed on or held. */
  get taken(): number {
    return this.done + this.fill;
  }

  async push(chunk: Uint8Array): Promise<void> {
    let p = 0;
    while (p < chunk.byteLength) {
      const n = Math.min(this.buf.byteLength - this.fill, chunk.byteLength - p);
      this.buf.set(chunk.subarray(p, p + n), this.fill);
      this.fill += n;
      p += n;
      if (this.fill === this.buf.byteLength) await this.flush();
    }
  }

  async flush(): Promise<void> {
    if (this.fill === 0) return;
    const n = this.fill;
    this.fill = 0;
    await this.sink(this.buf.subarray(0, n), this.done);
    this.done += n;
  }
}

/**
 * Streams bytes [offset, offset + length) of a response body whose first byte is file byte
 * `bodyStart` (the range's own start for a 206, 0 for a server that sent the whole file).
 */
export async function streamBody(
  source: string,
  body: ReadableStream<Uint8Array>,
  bodyStart: number,
  offset: number,
  length: number,
  sink: PieceSink,
  opts: StreamOptions = {},
): Promise<void> {
  const out = new PieceWriter(sink, opts.pieceBytes ?? PIECE_BYTES);
  const reader = body.getReader();
  const onAbort = () => void reader.cancel().catch(() => {});
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  let pos = bodyStart;
  let finished = false;
  try {
    while (out.taken < length) {
      stopIfAborted(opts.signal);
      let r: ReadableStreamReadResult<Uint8Array>;
      try {
        r = await reader.read();
      } catch (e) {
        stopIfAborted(opts.signal);
        throw cannotRead(source, e);
      }
      stopIfAborted(opts.signal);
      if (r.done) {
        finished = true;
        break;
      }
      const chunk = r.value;
      const from = Math.max(offset - pos, 0);
      const to = Math.min(chunk.byteLength, offset + length - pos);
      if (to > from) await out.push(chunk.subarray(from, to));
      pos += chunk.byteLength;
    }
    if (out.taken < length) throw short(source, offset, length, out.taken);
    await out.flush();
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
    if (!finished) await reader.cancel().catch(() => {});
  }
}

/** Streams a range of a Blob (a picked file, an OPFS file) one `slice` per piece: the file is never read whole. */
export async function streamBlob(
  source: string,
  blob: Blob,
  offset: number,
  length: number,
  sink: PieceSink,
  opts: StreamOptions = {},
  counted?: (n: number) => void,
): Promise<void> {
  checkRange(source, offset, length, blob.size);
  const piece = checkPiece(opts.pieceBytes ?? PIECE_BYTES);
  for (let at = 0; at < length; at += piece) {
    stopIfAborted(opts.signal);
    const n = Math.min(piece, length - at);
    const bytes = await blob
      .slice(offset + at, offset + at + n)
      .arrayBuffer()
      .catch((e: unknown) => {
        throw cannotRead(source, e, '; was it moved or changed on disk?');
      });
    if (bytes.byteLength !== n) throw short(source, offset, length, at + bytes.byteLength);
    counted?.(n);
    stopIfAborted(opts.signal);
    await sink(new Uint8Array(bytes), at);
  }
}

/** A Blob as a StreamedFile. */
export function streamedBlob(source: string, blob: Blob, counted?: (n: number) => void): StreamedFile {
  return { source, stream: (o, l, sink, opts) => streamBlob(source, blob, o, l, sink, opts, counted) };
}

/**
 * The StreamedFile of a model file: a picked folder's File, a Node path, or a URL. Opens
 * nothing until a range is streamed; a missing file fails then, naming it.
 */
export function streamedFile(source: string): StreamedFile {
  const local = localFile(source);
  if (local) {
    if (!local.file)
      throw new ModelLoadError(
        source,
        `is not in the chosen folder (${local.folder}); choose the folder that holds config.json and the weights`,
      );
    return streamedBlob(source, local.file, local.counted);
  }
  if (isNode() && !isUrl(source))
    return { source, stream: (o, l, sink, opts) => streamNodeFile(source, o, l, sink, opts) };
  return { source, stream: (o, l, sink, opts) => streamUrl(source, o, l, sink, opts) };
}

async function streamUrl(
  source: string,
  offset: number,
  length: number,
  sink: PieceSink,
  opts: StreamOptions = {},
): Promise<void> {
  checkRange(source, offset, length);
  checkPiece(opts.pieceBytes ?? PIECE_BYTES);
  if (length === 0) return;
  stopIfAborted(opts.signal);
  let res: Response;
  try {
    res = await fetch(source, { headers: { Range: `bytes=${offset}-${offset + length - 1}` }, signal: opts.signal });
  } catch (e) {
    stopIfAborted(opts.signal);
    throw cannotRead(source, e);
  }
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    throw cannotRead(source, new Error(`HTTP ${res.status} ${res.statusText}`));
  }
  if (!res.body) throw cannotRead(source, new Error('the response has no body'));
  // A 200 is the whole file from byte 0: the server ignored Range.
  await streamBody(source, res.body, res.status === 206 ? offset : 0, offset, length, sink, opts);
}

async function streamNodeFile(
  source: string,
  offset: number,
  length: number,
  sink: PieceSink,
  opts: StreamOptions = {},
): Promise<void> {
  checkRange(source, offset, length);
  const piece = new Uint8Array(checkPiece(opts.pieceBytes ?? PIECE_BYTES));
  const fs = nodeHost(`reading ${source}`).fsp;
  const handle = await fs.open(source.startsWith('file:') ? new URL(source) : source, 'r').catch((e: unknown) => {
    throw cannotRead(source, e);
  });
  try {
    for (let at = 0; at < length;) {
      stopIfAborted(opts.signal);
      const n = Math.min(piece.byteLength, length - at);
      let got = 0;
      while (got < n) {
        const { bytesRead } = await handle.read(piece, got, n - got, offset + at + got).catch((e: unknown) => {
          throw cannotRead(source, e);
        });
        if (bytesRead === 0) throw short(source, offset, length, at + got);
        got += bytesRead;
      }
      await sink(piece.subarray(0, n), at);
      at += n;
    }
  } finally {
    await handle.close();
  }
}
