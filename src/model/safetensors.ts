/**
 * safetensors reader: an 8-byte little-endian header length, a JSON header
 * { name: { dtype, shape, data_offsets: [begin, end] } }, then the raw bytes.
 * Tensors come back as Float32Array (F16/BF16 widened), I32 as Int32Array.
 */
import { ModelLoadError } from '../errors.js';

export interface TensorInfo {
  dtype: string;
  shape: number[];
  begin: number;
  end: number;
}

/**
 * Two tensors whose bytes overlap: the format forbids it (upstream's reader refuses such a
 * file), and it means a corrupt header, since no writer shares bytes between tensors.
 */
export function refuseOverlaps(file: string, ranges: { name: string; begin: number; end: number }[]): void {
  const sorted = ranges.filter((r) => r.end > r.begin).sort((a, b) => a.begin - b.begin);
  for (let i = 1; i < sorted.length; i++) {
    const [a, b] = [sorted[i - 1], sorted[i]];
    if (b.begin < a.end)
      throw new ModelLoadError(
        file,
        `its bytes ${b.begin}..${b.end} overlap those of ${a.name} (${a.begin}..${a.end}): the header is corrupt; download or write the file again`,
        b.name,
      );
  }
}

export class SafeTensors {
  readonly tensors = new Map<string, TensorInfo>();
  readonly metadata: Record<string, string> = {};
  private readonly dataStart: number;

  constructor(
    private readonly buf: ArrayBuffer,
    readonly file: string,
  ) {
    if (buf.byteLength < 8)
      throw new ModelLoadError(file, `file is ${buf.byteLength} bytes, too short for a safetensors header`);
    const view = new DataView(buf);
    const n = Number(view.getBigUint64(0, true));
    if (n <= 0 || 8 + n > buf.byteLength) {
      throw new ModelLoadError(
        file,
        `header length ${n} exceeds the file (${buf.byteLength} bytes): truncated or not safetensors`,
      );
    }
    let header: Record<string, unknown>;
    try {
      header = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 8, n)));
    } catch (e) {
      throw new ModelLoadError(file, `header is not valid JSON (${(e as Error).message})`);
    }
    this.dataStart = 8 + n;
    const dataBytes = buf.byteLength - this.dataStart;
    for (const [name, v] of Object.entries(header)) {
      if (name === '__metadata__') {
        Object.assign(this.metadata, v);
        continue;
      }
      const t = (v ?? {}) as { dtype: string; shape: number[]; data_offsets: [number, number] };
      if (
        typeof t.dtype !== 'string' ||
        !Array.isArray(t.shape) ||
        !t.shape.every((d) => Number.isInteger(d) && d >= 0)
      ) {
        throw new ModelLoadError(file, 'header entry lacks a dtype or an integer shape', name);
      }
      const [begin, end] = Array.isArray(t.data_offsets) ? t.data_offsets : [-1, -1];
      if (!(Number.isInteger(begin) && Number.isInteger(end) && begin >= 0 && end >= begin))
        throw new ModelLoadError(file, 'bad data_offsets', name);
      if (end > dataBytes) {
        throw new ModelLoadError(
          file,
          `data ends at byte ${end} but the file holds ${dataBytes} data bytes: the file is truncated`,
          name,
        );
      }
      const count = t.shape.reduce((a, b) => a * b, 1);
      const size = bytesPer(t.dtype, file, name);
      if (count * size !== end - begin)
        throw new ModelLoadError(
          file,
          `shape [${t.shape}] of ${t.dtype} needs ${count * size} bytes, offsets span ${end - begin}`,
          name,
        );
      this.tensors.set(name, { dtype: t.dtype, shape: t.shape, begin, end });
    }
    refuseOverlaps(
      file,
      [...this.tensors].map(([name, t]) => ({ name, begin: t.begin, end: t.end })),
    );
  }

  has(name: string): boolean {
    return this.tensors.has(name);
  }

  info(name: string): TensorInfo {
    const t = this.tensors.get(name);
    if (!t) throw new ModelLoadError(this.file, 'tensor is missing', name);
    return t;
  }

  /** The tensor widened to f32, checked against `shape` when given. */
  /**
   * Like `f32`, but an aligned F32 tensor is a view into the file's buffer, not a copy: the
   * decoder loaded from one buffer then holds its bytes once, not twice. The caller must
   * not modify it (it is the file's memory).
   */
  f32View(name: string, shape?: number[]): Float32Array {
    const t = this.info(name);
    const at = this.dataStart + t.begin;
    if (t.dtype === 'F32' && at % 4 === 0 && t.shape.length === (shape ?? t.shape).length) {
      if (!shape || shape.every((d, i) => d === t.shape[i]))
        return new Float32Array(this.buf, at, (t.end - t.begin) / 4);
    }
    return this.f32(name, shape);
  }

  f32(name: string, shape?: number[]): Float32Array {
    const t = this.info(name);
    if (shape && (shape.length !== t.shape.length || shape.some((d, i) => d !== t.shape[i]))) {
      throw new ModelLoadError(
        this.file,
        `shape [${t.shape}] does not match config.json, which implies [${shape}]`,
        name,
      );
    }
    const bytes = new Uint8Array(this.buf, this.dataStart + t.begin, t.end - t.begin);
    const n = bytes.byteLength / bytesPer(t.dtype, this.file, name);
    switch (t.dtype) {
      case 'F32': {
        const out = new Float32Array(n);
        new Uint8Array(out.buffer).set(bytes); // copy: the source may be unaligned
        return out;
      }
      case 'F16':
      case 'BF16': {
        const src = new Uint16Array(n);
        new Uint8Array(src.buffer).set(bytes);
        const out = new Float32Array(n);
        for (let i = 0; i < n; i++) out[i] = t.dtype === 'F16' ? halfToFloat(src[i]) : bf16ToFloat(src[i]);
        return out;
      }
      case 'I32': {
        const src = new Int32Array(n);
        new Uint8Array(src.buffer).set(bytes);
        return Float32Array.from(src);
      }
      default:
        throw new ModelLoadError(this.file, `dtype ${t.dtype} is not supported (F32, F16, BF16, I32)`, name);
    }
  }

  i32(name: string): Int32Array {
    const t = this.info(name);
    if (t.dtype !== 'I32') return Int32Array.from(this.f32(name));
    const out = new Int32Array((t.end - t.begin) / 4);
    new Uint8Array(out.buffer).set(new Uint8Array(this.buf, this.dataStart + t.begin, t.end - t.begin));
    return out;
  }
}

function bytesPer(dtype: string, file: string, name: string): number {
  switch (dtype) {
    case 'F32':
    case 'I32':
      return 4;
    case 'F16':
    case 'BF16':
      return 2;
    default:
      throw new ModelLoadError(file, `dtype ${dtype} is not supported`, name);
  }
}

function bf16ToFloat(h: number): number {
  const f = new Float32Array(new Uint32Array([h << 16]).buffer);
  return f[0];
}

function halfToFloat(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** Writes F32/I32 tensors as safetensors (tests and fixtures). */
export function encodeSafeTensors(
  tensors: Record<string, { data: Float32Array | Int32Array; shape: number[] }>,
): ArrayBuffer {
  const header: Record<string, unknown> = {};
  let off = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const dtype = t.data instanceof Int32Array ? 'I32' : 'F32';
    header[name] = { dtype, shape: t.shape, data_offsets: [off, off + t.data.byteLength] };
    off += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  while ((8 + json.length) % 8 !== 0) json += ' ';
  const hb = new TextEncoder().encode(json);
  const out = new ArrayBuffer(8 + hb.byteLength + off);
  new DataView(out).setBigUint64(0, BigInt(hb.byteLength), true);
  new Uint8Array(out, 8, hb.byteLength).set(hb);
  let p = 8 + hb.byteLength;
  for (const t of Object.values(tensors)) {
    new Uint8Array(out, p, t.data.byteLength).set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    p += t.data.byteLength;
  }
  return out;
}
