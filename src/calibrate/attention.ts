/**
 * Teacher-forced attention for calibration: the transcript is appended after the
 * instruction and every query head's softmax row that predicts a transcript token is
 * kept, restricted to the audio positions (renormalisation is irrelevant: Voice Score
 * only ranks positions).
 */
import { prefillLayers } from '../reference/prefill.js';
import { ropeFrequencies } from '../reference/ops.js';
import { audioStart, promptLength, type ModelConfig } from '../model/config.js';
import type { DecoderWeights } from '../model/weights.js';

/** rows[j][layer * numHeads + head] = audio attention (length N) of the row predicting tokens[j]. */
export function answerAttention(
  c: ModelConfig,
  w: DecoderWeights,
  audio: Float32Array,
  N: number,
  tokens: number[],
): Float32Array[][] {
  const first = promptLength(c, N) - 1; // the last instruction row predicts tokens[0]
  const a0 = audioStart(c);
  const rows: Float32Array[][] = tokens.map(() => new Array<Float32Array>(c.numLayers * c.numHeads));
  prefillLayers(
    c,
    w,
    ropeFrequencies(c.headDim, c.ropeTheta),
    audio,
    N,
    { decodeHeads: [], prefillQueries: 0 },
    {
      suffix: tokens.slice(0, -1),
      capture: {
        fromRow: first,
        onRow: (layer, head, row, e, sum) => {
          const a = new Float32Array(N);
          for (let p = 0; p < N; p++) a[p] = e[a0 + p] / sum;
          rows[row - first][layer * c.numHeads + head] = a;
        },
      },
    },
  );
  return rows;
}

/** Word index of every token: a piece that starts with a space (▁) opens the next word. */
export function tokenWordIndex(pieces: string[]): number[] {
  let w = -1;
  return pieces.map((p) => {
    if (p.startsWith(' ') || w < 0) w++;
    return w;
  });
}
