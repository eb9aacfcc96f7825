/**
 * Every WGSL kernel against its plain-TS reference (src/backend/cpu/ops.ts) in headless
 * Chromium on WebGPU (SwiftShader here), at shipped scale: > 4,000 positions, many pages,
 * per-head page tables that differ and are not contiguous, split-K boundaries, EMPTY slots.
 * NMSE bounds as llama.cpp's: 1e-7 for f32 matmuls, 5e-4 for attention.
 */
import { gpuChecks } from './gpu-checks.js';

const CHECKS = [
  'matvec_lm_head', 'matvec_add_o_proj', 'matvec_add_down', 'matvec_swiglu',
  'matmul_qkv', 'matmul_add_down', 'rmsnorm', 'swiglu', 'embed', 'argmax',
  'rope_split', 'qkv_rope_append', 'kv_gather', 'paged_decode_attention', 'causal_prefill_attention',
];

gpuChecks('kernel', CHECKS);
