/**
 * TensorLookups for the encoder: over safetensors files held in memory, or over a Hugging
 * Face checkpoint (sharded or not), from which the encoder's and projector's tensors are
 * read up front, widened to f32 (BF16/F16/F32 as stored).
 */
import type { SafeTensors } from '../model/safetensors.js';
import type { HfCheckpoint } from '../model/hf/checkpoint.js';
import type { TensorLookup } from './whisper.js';
import type { WhisperFamilySpec } from './whisper-config.js';

export function lookupFromSafeTensors(
  shards: SafeTensors[],
  source = shards.map((s) => s.file).join(', '),
): TensorLookup {
  return {
    source,
    get(name: string): Float32Array | undefined {
      const shard = shards.find((s) => s.has(name));
      return shard ? shard.f32(name) : undefined;
    },
  };
}

/** Reads every tensor under the family's encoder prefix and every projector tensor its post steps name. */
export async function lookupFromCheckpoint(ckpt: HfCheckpoint, spec: WhisperFamilySpec): Promise<TensorLookup> {
  const extra = spec.post.flatMap((s) =>
    s.op === 'linear' || s.op === 'layernorm' ? [`${s.name}.weight`, `${s.name}.bias`] : [],
  );
  const names = [...ckpt.tensors.keys()].filter((n) => n.startsWith(spec.prefix) || extra.includes(n));
  const held = new Map<string, Float32Array>();
  for (const n of names) held.set(n, await ckpt.f32(n, ckpt.tensors.get(n)!.shape));
  return { source: ckpt.listing, get: (n) => held.get(n) };
}
