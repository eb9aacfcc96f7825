/**
 * Teacher-forced fidelity: decode the full cache's own token sequence once more under a
 * policy's cache, with the policy's recalls and releases running as in free decoding,
 * and compare each step's logits with the full cache's on the same tokens. Free decoding
 * drifts apart after the first disagreement, after which its WER says little about the
 * cache; forcing the same context at every step measures what the cache itself loses.
 * It needs no reference transcript, so it runs on any audio.
 *
 * The decode loop is the transcriber's own (run.ts, with the probe's `forcedTokens` and `onLogits`).
 */
import type { TranscribeOptions, TranscriptionResult } from '../index.js';
import { compareSteps, type StepFidelity } from './fidelity.js';
import { measureCoverage, recordAttention, type AttentionSample, type Coverage } from './coverage.js';

/** One decode of the clip at hand with these options (the eval: `asr.transcribe(audio, o)`). */
export type Decode = (options: TranscribeOptions) => Promise<TranscriptionResult>;

/** What every policy of a clip is compared with: the full cache's transcript, tokens and logits. */
export interface FullReference {
  text: string;
  /** The tokens the full cache fed, one per decode step (its last greedy token, never fed, is not among them). */
  tokens: number[];
  /** Per decode step, the full cache's logits on those tokens. */
  logits: Float32Array[];
  /** The stop token the full cache ended on; null when it ran to the length guard. */
  stopToken: number | null;
  /** Every head's audio attention at sampled steps (coverage.ts), when asked for. */
  attention?: AttentionSample;
}

/** Decodes `tokens` under the options' policy and returns each step's logits. */
export async function forcedLogits(
  decode: Decode,
  tokens: readonly number[],
  options: TranscribeOptions,
): Promise<Float32Array[]> {
  const logits: Float32Array[] = [];
  const r = await decode({
    ...options,
    probe: { ...options.probe, forcedTokens: tokens, onLogits: (_step, l) => logits.push(l) },
  });
  if (r.error) throw r.error;
  if (logits.length !== tokens.length) {
    throw new Error(
      `teacher forcing gave logits for ${logits.length} of ${tokens.length} steps (does this backend return logits?)`,
    );
  }
  return logits;
}

/**
 * The reference from a free full-cache run: its tokens are forced once more, under the
 * full cache, to record the logits (the timed free run itself does not pay for them).
 */
export async function fullReference(
  decode: Decode,
  free: TranscriptionResult,
  options: TranscribeOptions = {},
  { attention = false } = {},
): Promise<FullReference> {
  if (free.error)
    throw new Error(`the full cache's run failed (${free.error.message}), so there is nothing to compare with`);
  const tokens = free.tokens.slice(0, free.stats.decodeSteps);
  const rec = attention ? recordAttention(tokens.length) : null;
  const logits = await forcedLogits(decode, tokens, {
    ...options,
    policy: 'full',
    budget: 1,
    policyOptions: undefined,
    ...(rec ? { probe: { ...options.probe, onAttention: rec.onAttention } } : {}),
  });
  return {
    text: free.text,
    tokens,
    logits,
    stopToken: free.stats.stopToken ?? null,
    ...(rec ? { attention: rec.sample } : {}),
  };
}

/** The policy's cache on the full cache's tokens: top-1 agreement, KL(full ‖ policy) and the stop token's shift, summed over steps. */
export async function teacherForced(
  decode: Decode,
  ref: FullReference,
  options: TranscribeOptions,
): Promise<StepFidelity & { coverage: Coverage | null }> {
  const cov = ref.attention ? measureCoverage(ref.attention) : null;
  const logits = await forcedLogits(
    decode,
    ref.tokens,
    cov ? { ...options, probe: { ...options.probe, onResidency: cov.onResidency } } : options,
  );
  return { ...compareSteps(ref.logits, logits, ref.stopToken), coverage: cov?.result() ?? null };
}
