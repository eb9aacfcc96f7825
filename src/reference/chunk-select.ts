/**
 * WnW's chunk choice as the GPU makes it (shaders/chunk_select.wgsl), in plain TypeScript:
 * the anchors' attention summed per segment, each chunk's mean, and the top k chunks (best
 * first, ties to the lower index), in f32 with the kernel's order of additions, so both
 * backends choose bit for bit the same chunks. It is the scheduler's ranking
 * (policy/wnw/chunks.ts `chunkScores`, which sums in f64) up to rounding: the two differ
 * only where two chunks' means agree to ~1e-7, and there in which of them comes first.
 *
 * The mean is the sum times the chunk's 1/length rounded to f32 (`chunkScales`, computed
 * here and uploaded): a GPU's division is not correctly rounded (WGSL allows 2.5 ulp), a
 * product is, and one f32 score per chunk makes the order a strict total order.
 */

/** What the anchors' attention is reduced to, for a clip of `audioLength` positions. */
export interface ChunkSelectSpec {
  /** Rows of the exported weights summed (the anchors: the first rows of the export). */
  heads: number;
  audioLength: number;
  segmentLength: number;
  /** Segments per chunk (stride one segment). */
  chunkSegments: number;
  /** Chunks chosen; fewer come back where the clip has fewer. */
  topChunks: number;
}

export function chunkCounts(s: ChunkSelectSpec): { segments: number; chunks: number } {
  const segments = Math.ceil(s.audioLength / s.segmentLength);
  // As ChunkScheduler: fewer segments than a chunk make one chunk over all of them.
  const chunks = segments === 0 ? 0 : Math.max(1, segments - s.chunkSegments + 1);
  return { segments, chunks };
}

/** Per chunk: f32(1 / its length in positions) (the last chunks may hold a partial segment). */
export function chunkScales(s: ChunkSelectSpec): Float32Array {
  const { segments, chunks } = chunkCounts(s);
  const n = s.segmentLength;
  return Float32Array.from(
    { length: chunks },
    (_, c) => 1 / (Math.min(s.audioLength, Math.min(segments, c + s.chunkSegments) * n) - c * n),
  );
}

export interface ChunkChoice {
  /** Chunk indices, best first (length min(topChunks, chunks)). */
  chunks: Int32Array;
  /** The anchors' attention summed per segment (the tide chart's). */
  segmentSums: Float32Array;
}

/**
 * `weights`: the exported rows, [rows ≥ heads][audioLength] as one flat array (row r at
 * r · audioLength) or one array per row.
 */
export function selectChunks(weights: Float32Array | ArrayLike<number>[], s: ChunkSelectSpec): ChunkChoice {
  const f = Math.fround;
  const T = s.audioLength;
  const n = s.segmentLength;
  const at = Array.isArray(weights)
    ? (r: number, p: number) => (weights as ArrayLike<number>[])[r][p]
    : (r: number, p: number) => (weights as Float32Array)[r * T + p];
  const { segments, chunks } = chunkCounts(s);
  const segmentSums = new Float32Array(segments);
  for (let g = 0; g < segments; g++) {
    let seg = 0;
    for (let p = g * n; p < Math.min(T, (g + 1) * n); p++) {
      let a = 0;
      for (let r = 0; r < s.heads; r++) a = f(a + at(r, p));
      seg = f(seg + a);
    }
    segmentSums[g] = seg;
  }
  const scale = chunkScales(s);
  const score = new Float32Array(chunks);
  for (let c = 0; c < chunks; c++) {
    let sum = 0;
    for (let g = c; g < Math.min(segments, c + s.chunkSegments); g++) sum = f(sum + segmentSums[g]);
    score[c] = sum * scale[c];
  }
  const order = Array.from({ length: chunks }, (_, c) => c).sort((a, b) => score[b] - score[a] || a - b);
  return { chunks: Int32Array.from(order.slice(0, s.topChunks)), segmentSums };
}

/** A step observation's chunk fields for a request's `decodeChunks` (none without it), as a backend reports them. */
export function chunkObservation(
  weights: ArrayLike<number>[],
  dc: { heads: number; chunkSegments: number; topChunks: number; segmentSums?: boolean } | undefined,
  audioLength: number,
  segmentLength: number,
): { chunks?: Int32Array; segmentSums?: Float32Array } {
  if (!dc) return {};
  const c = selectChunks(weights, { ...dc, audioLength, segmentLength });
  return dc.segmentSums ? c : { chunks: c.chunks };
}
