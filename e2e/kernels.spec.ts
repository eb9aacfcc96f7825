/**
 * Every WGSL kernel against its plain-TS reference (src/backend/cpu/ops.ts) in headless
 * Chromium on WebGPU (SwiftShader here), at shipped scale: > 4,000 positions, many pages,
 * per-head page tables that differ and are not contiguous, split-K boundaries, EMPTY slots.
 * NMSE bounds as llama.cpp's: 1e-7 for f32 matmuls, 5e-4 for attention. The pool's kernels
 * also run on an f16 pool.
 */
import { gpuChecks } from './gpu-checks.js';

const CHECKS = [
  'matvec_lm_head', 'matvec_add_o_proj', 'matvec_add_down', 'matvec_swiglu',
  'matmul_qkv', 'matmul_add_down', 'rmsnorm', 'swiglu', 'embed', 'argmax',
  'rope_split', 'qkv_rope_append', 'kv_gather', 'paged_decode_attention', 'causal_prefill_attention',
  'qkv_rope_append_f16', 'kv_gather_f16', 'paged_decode_attention_f16',
];

gpuChecks('kernel', CHECKS);
