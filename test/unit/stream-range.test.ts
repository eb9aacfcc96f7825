/**
 * Streaming byte ranges of model files in bounded pieces (src/model/stream-range.ts) and a
 * packed decoder's source streamed or read whole (src/model/packed-source.ts): piece
 * boundaries inside a range, a tensor straddling pieces, ranges stacked into one matrix,
 * errors mid-stream, cancel.
 */
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CancelledError, ModelLoadError } from '../../src/errors.js';
import {
  PieceWriter,
  streamBlob,
  streamBody,
  streamedBlob,
  streamedFile,
  type StreamedFile,
} from '../../src/model/stream-range.js';
import {
  readPackedSource,
  stackRows,
  streamMatrix,
  streamedMatrix,
  type StreamedMatrix,
} from '../../src/model/packed-source.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';

afterAll(removeTempDirs);
afterEach(() => vi.unstubAllGlobals());

/** Bytes 0..n-1 as (i * 7 + 3) mod 251, so any misplaced byte shows. */
function pattern(n: number): Uint8Array<ArrayBuffer> {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = (i * 7 + 3) % 251;
  return b;
}

/** A body delivering `bytes` in chunks of the given sizes (cycled); `fail` errors it after that many bytes. */
function body(
  bytes: Uint8Array,
  sizes: number[],
  opts: { fail?: number; onCancel?: () => void } = {},
): ReadableStream<Uint8Array> {
  let pos = 0;
  let k = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (opts.fail !== undefined && pos >= opts.fail) {
        c.error(new Error('connection reset'));
        return;
      }
      if (pos >= bytes.length) {
        c.close();
        return;
      }
      const n = sizes[k++ % sizes.length];
      c.enqueue(bytes.slice(pos, pos + n));
      pos += n;
    },
    cancel() {
      opts.onCancel?.();
    },
  });
}

/** A sink that records every piece (copied: the streamer reuses its memory) and its offset. */
function recorder() {
  const pieces: { at: number; bytes: Uint8Array }[] = [];
  return {
    pieces,
    sink: (piece: Uint8Array, at: number) => void pieces.push({ at, bytes: piece.slice() }),
    joined(): Uint8Array {
      const n = pieces.reduce((s, p) => s + p.bytes.length, 0);
      const out = new Uint8Array(n);
      let expectAt = 0;
      for (const p of pieces) {
        expect(p.at).toBe(expectAt);
        out.set(p.bytes, p.at);
        expectAt += p.bytes.length;
      }
      return out;
    },
  };
}

describe('PieceWriter', () => {
  it('hands on pieces of exactly pieceBytes whatever the chunk sizes, the last one shorter', async () => {
    const r = recorder();
    const w = new PieceWriter(r.sink, 8);
    const src = pattern(45);
    for (const [a, b] of [
      [0, 3],
      [3, 4],
      [4, 29],
      [29, 30],
      [30, 45],
    ])
      await w.push(src.subarray(a, b));
    await w.flush();
    expect(r.pieces.map((p) => p.bytes.length)).toEqual([8, 8, 8, 8, 8, 5]);
    expect(r.joined()).toEqual(src);
  });

  it('refuses a piece size that is not a positive multiple of 4', () => {
    expect(() => new PieceWriter(() => {}, 6)).toThrow(RangeError);
    expect(() => new PieceWriter(() => {}, 0)).toThrow(RangeError);
  });
});

describe('streamBody', () => {
  const file = pattern(1000);

  it('streams a range whose ends fall inside chunks and inside pieces', async () => {
    // The body is the 206 answer to bytes 100..899: chunks of odd sizes, pieces of 64.
    const r = recorder();
    await streamBody('w.safetensors', body(file.subarray(100, 900), [13, 50, 1, 200]), 100, 100, 800, r.sink, {
      pieceBytes: 64,
    });
    expect(r.pieces.slice(0, -1).every((p) => p.bytes.length === 64)).toBe(true);
    expect(r.joined()).toEqual(file.subarray(100, 900));
  });

  it('keeps only the range of a whole-file body (a server that ignored Range), and stops reading there', async () => {
    const r = recorder();
    let cancelled = false;
    await streamBody('w.safetensors', body(file, [37], { onCancel: () => (cancelled = true) }), 0, 333, 222, r.sink, {
      pieceBytes: 16,
    });
    expect(r.joined()).toEqual(file.subarray(333, 555));
    expect(cancelled).toBe(true);
  });

  it('a body that ends short of the range: ModelLoadError naming the file, saying truncated', async () => {
    const r = recorder();
    const e = await streamBody('shard-2.safetensors', body(file.subarray(0, 500), [64]), 0, 0, 600, r.sink, {
      pieceBytes: 128,
    }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ModelLoadError);
    expect((e as ModelLoadError).file).toBe('shard-2.safetensors');
    expect(String(e)).toMatch(/100 bytes short of the range 0\.\.600.*truncated/);
    // The pieces before the failure were whole pieces, in order.
    expect(r.joined()).toEqual(file.subarray(0, 384));
  });

  it('a connection error mid-stream: ModelLoadError naming the file and the cause', async () => {
    const e = await streamBody('a.safetensors', body(file, [100], { fail: 300 }), 0, 0, 1000, () => {}, {
      pieceBytes: 64,
    }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ModelLoadError);
    expect(String(e)).toMatch(/a\.safetensors: cannot read the file \(connection reset\)/);
  });

  it("the sink's own error ends the stream as it is, and the body is cancelled", async () => {
    let cancelled = false;
    const boom = new RangeError('device said no');
    let calls = 0;
    const e = await streamBody(
      'a.safetensors',
      body(file, [100], { onCancel: () => (cancelled = true) }),
      0,
      0,
      1000,
      () => {
        if (++calls === 2) throw boom;
      },
      { pieceBytes: 64 },
    ).catch((x: unknown) => x);
    expect(e).toBe(boom);
    expect(cancelled).toBe(true);
  });

  it('a cancel mid-stream: CancelledError, no piece after it, the body cancelled', async () => {
    const ac = new AbortController();
    let cancelled = false;
    const r = recorder();
    const e = await streamBody(
      'a.safetensors',
      body(file, [50], { onCancel: () => (cancelled = true) }),
      0,
      0,
      1000,
      (piece, at) => {
        r.sink(piece, at);
        if (at === 128) ac.abort();
      },
      { pieceBytes: 64, signal: ac.signal },
    ).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(CancelledError);
    expect(r.pieces.map((p) => p.at)).toEqual([0, 64, 128]);
    expect(cancelled).toBe(true);
  });
});

describe('streamBlob and streamedFile', () => {
  const file = pattern(4096 + 12);

  it('a Blob: one slice per piece, the range only', async () => {
    const blob = new Blob([file]);
    const sliced: [number, number][] = [];
    const spy = {
      size: blob.size,
      slice: (a: number, b: number) => (sliced.push([a, b]), blob.slice(a, b)),
    } as unknown as Blob;
    const r = recorder();
    await streamBlob('picked/model.safetensors', spy, 10, 1000, r.sink, { pieceBytes: 256 });
    expect(r.joined()).toEqual(file.subarray(10, 1010));
    expect(sliced).toEqual([
      [10, 266],
      [266, 522],
      [522, 778],
      [778, 1010],
    ]);
  });

  it('a Blob range past its end: ModelLoadError before any read; a cancel: CancelledError', async () => {
    const blob = new Blob([file]);
    await expect(streamBlob('x.bin', blob, 4000, 200, () => {})).rejects.toThrow(
      /x\.bin: ends at byte 4108.*truncated/,
    );
    const ac = new AbortController();
    const seen: number[] = [];
    const e = await streamBlob(
      'x.bin',
      blob,
      0,
      4096,
      (_, at) => {
        seen.push(at);
        ac.abort();
      },
      { pieceBytes: 1024, signal: ac.signal },
    ).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(CancelledError);
    expect(seen).toEqual([0]);
  });

  it('a file on disk (Node): pieces read in place, a range past its end fails naming the file', async () => {
    const dir = tempDir('stream-range-');
    const path = join(dir, 'model.safetensors');
    writeFileSync(path, file);
    const f = streamedFile(path);
    const r = recorder();
    await f.stream(4, 4100, r.sink, { pieceBytes: 1024 });
    expect(r.pieces.map((p) => p.bytes.length)).toEqual([1024, 1024, 1024, 1024, 4]);
    expect(r.joined()).toEqual(file.subarray(4, 4104));
    const e = await f.stream(4000, 200, () => {}, { pieceBytes: 64 }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ModelLoadError);
    expect(String(e)).toContain(path);
    expect(String(e)).toMatch(/truncated/);
    await expect(streamedFile(join(dir, 'absent.safetensors')).stream(0, 4, () => {})).rejects.toThrow(
      /absent\.safetensors: cannot read the file/,
    );
  });

  it('a URL: one Range request read through its body; a 200 is cut to the range; an HTTP error names the file', async () => {
    const asked: (string | null)[] = [];
    let status = 206;
    vi.stubGlobal('fetch', async (_url: string, init?: RequestInit) => {
      const range = new Headers(init?.headers).get('range');
      asked.push(range);
      if (status === 404) return new Response('no', { status: 404, statusText: 'Not Found' });
      const m = /bytes=(\d+)-(\d+)/.exec(range!)!;
      const bytes = status === 206 ? file.slice(Number(m[1]), Number(m[2]) + 1) : file.slice();
      return new Response(body(bytes, [333]), { status });
    });
    const f = streamedFile('http://127.0.0.1:1/m/model-00001-of-00002.safetensors');
    const r = recorder();
    await f.stream(100, 2000, r.sink, { pieceBytes: 512 });
    expect(asked).toEqual(['bytes=100-2099']);
    expect(r.joined()).toEqual(file.subarray(100, 2100));
    status = 200;
    const r2 = recorder();
    await f.stream(1000, 300, r2.sink, { pieceBytes: 128 });
    expect(r2.joined()).toEqual(file.subarray(1000, 1300));
    status = 404;
    await expect(f.stream(0, 8, () => {})).rejects.toThrow(
      /model-00001-of-00002\.safetensors: cannot read the file \(HTTP 404/,
    );
  });
});

describe('a packed source', () => {
  /** Two tensors in one file, a third in another, with gaps around them. */
  function files(): { a: StreamedFile; b: StreamedFile; bytesA: Uint8Array; bytesB: Uint8Array } {
    const bytesA = pattern(2000);
    const bytesB = pattern(700).map((x) => 255 - x);
    return {
      a: streamedBlob('a.safetensors', new Blob([bytesA])),
      b: streamedBlob('b.safetensors', new Blob([bytesB])),
      bytesA,
      bytesB,
    };
  }

  it('stacks tensors as rows and streams them as one matrix, a tensor straddling pieces', async () => {
    const { a, b, bytesA, bytesB } = files();
    // f32 [rows, 10]: 40 bytes a row. q: 5 rows at 100, k: 3 rows at 900 (of a), v: 2 rows at 40 (of b).
    const q = streamedMatrix('f32', 5, 10, { file: a, offset: 100, byteLength: 200, name: 'q' });
    const k = streamedMatrix('f32', 3, 10, { file: a, offset: 900, byteLength: 120, name: 'k' });
    const v = streamedMatrix('f32', 2, 10, { file: b, offset: 40, byteLength: 80, name: 'v' });
    const qkv: StreamedMatrix = stackRows('qkv', [q, k, v]);
    expect([qkv.rows, qkv.cols]).toEqual([10, 10]);
    const r = recorder();
    await streamMatrix(qkv, r.sink, { pieceBytes: 64 });
    const want = new Uint8Array([
      ...bytesA.subarray(100, 300),
      ...bytesA.subarray(900, 1020),
      ...bytesB.subarray(40, 120),
    ]);
    expect(r.joined()).toEqual(want);
    // Pieces restart at each tensor: 200 = 64+64+64+8, 120 = 64+56, 80 = 64+16.
    expect(r.pieces.map((p) => p.bytes.length)).toEqual([64, 64, 64, 8, 64, 56, 64, 16]);
  });

  it('refuses a range whose length is not the shape’s, naming file and tensor; and stacks only like matrices', () => {
    const { a } = files();
    expect(() => streamedMatrix('f32', 5, 10, { file: a, offset: 0, byteLength: 196, name: 'q' })).toThrow(
      /a\.safetensors \(tensor q\): holds 196 bytes, a f32 \[5, 10\] tensor is 200/,
    );
    const x = streamedMatrix('f32', 1, 10, { file: a, offset: 0, byteLength: 40, name: 'x' });
    const y = streamedMatrix('f32', 1, 9, { file: a, offset: 0, byteLength: 36, name: 'y' });
    expect(() => stackRows('xy', [x, y])).toThrow(/xy: cannot stack/);
  });

  it('readPackedSource: a file error mid-matrix fails naming the file', async () => {
    const broken: StreamedFile = {
      source: 'gone.safetensors',
      stream: async (_o, _l, sink) => {
        await sink(new Uint8Array(8), 0);
        throw new ModelLoadError('gone.safetensors', 'cannot read the file (moved)');
      },
    };
    const m = streamedMatrix('f32', 1, 4, { file: broken, offset: 0, byteLength: 16, name: 'norm' });
    const src = {
      kind: 'packed-source' as const,
      format: 'f32' as const,
      embed: m,
      lmHead: m,
      norm: m,
      layers: [],
      where: 'gone.safetensors',
    };
    await expect(readPackedSource(src)).rejects.toThrow(/gone\.safetensors: cannot read the file \(moved\)/);
  });
});
