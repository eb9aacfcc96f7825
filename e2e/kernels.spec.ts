/**
 * Every WGSL kernel against its plain-TS reference (src/reference/ops.ts) in headless
 * Chromium on WebGPU (SwiftShader here), at shipped scale: > 4,000 positions, many pages,
 * per-head page tables that differ and are not contiguous, split-K boundaries, EMPTY slots.
 * NMSE bounds as llama.cpp's: 1e-7 for f32 matmuls, 5e-4 for attention, 1e-6 for f16/q4
 * weights against the same dequantised weights in TS. The kernels of the pool and of the
 * prefill K/V (which hold the pool's precision) also run on an f16 pool.
 */
import { gpuChecks } from './gpu-checks.js';

const CHECKS = [
  'matvec_lm_head',
  'matvec_add_o_proj',
  'matvec_add_down',
  'matvec_swiglu',
  'matmul_qkv',
  'matmul_add_down',
  'rmsnorm',
  'swiglu',
  'embed',
  'argmax',
  'rope_split',
  'qkv_rope_append',
  'append_positions',
  'kv_gather',
  'paged_decode_attention',
  'causal_prefill_attention',
  'qkv_rope_append_f16',
  'kv_gather_f16',
  'paged_decode_attention_f16',
  'rope_split_f16',
  'rope_split_bias_f16',
  'causal_prefill_attention_f16',
  // q/k/v biases (Qwen2 family), added before RoPE in decode and prefill.
  'rope_split_bias',
  'qkv_rope_append_bias',
  // Weight formats (src/model/quant.ts) at the real backbones' shapes: NMSE <= 1e-6
  // against the TS product of the same dequantised weights.
  'matvec_q4_3072x8192',
  'matvec_q4_8192x3072',
  'matvec_f16_3072x8192',
  'matvec_f16_8192x3072',
  'matvec_swiglu_q4',
  'matmul_q4_32x3072to8192',
  'matmul_add_q4_35x8192to3072',
  'matmul_f16_32x3072to8192',
  'matvec_q4_padded',
  'matmul_q4_padded',
  'lm_head_argmax_q4_131072',
  'lm_head_argmax_q4_151936',
  'lm_head_argmax_f16_split',
  // WnW's chunk choice: exactly the reference's and the scheduler's chunks, segment sums bit for bit.
  'chunk_select_voxtral_30min',
  'chunk_select_paper_partial',
  'chunk_select_ties',
  // Word timing's focus: focusOf's four positions and summed weights bit for bit, the same focus.
  'focus_voxtral_30min',
  'focus_partial_workgroup',
  'focus_ties',
  'focus_two_with_mass',
  'focus_no_mass',
  // A decode step's KV writes from its one upload: every word of a 30 x 8 x 128 pool in two
  // shards as the reference writes it, f32 and f16.
  'scatter_rows_voxtral_f32',
  'scatter_rows_voxtral_f16',
];

gpuChecks('kernel', CHECKS);
