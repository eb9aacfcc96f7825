/**
 * The decoder kernels specialised by weight format beyond the dense products (those are
 * in kernels.spec.ts): the embedding gather over a q4 / f16 table split across storage
 * bindings, and the decode QKV projection + RoPE + KV append with q4 / f16 Wqkv at the
 * real backbones' shapes, against the TS product of the same dequantised weights.
 */
import { gpuChecks } from './gpu-checks.js';

const CHECKS = [
  'embed_q4_split',
  'embed_f16_split',
  'qkv_rope_append_q4_voxtral',
  'qkv_rope_append_f16_voxtral',
  'qkv_rope_append_q4_omni_bias',
];

gpuChecks('weight format', CHECKS);
