/**
 * The whole decoder on WebGPU (headless Chromium, SwiftShader here) against the CPU
 * backend: identical greedy tokens for 64 decode steps after a prefill of > 1,000 audio
 * tokens, the same prefill plan and mid-decode recall/release plans on both, exported
 * weights and queries within attention tolerance, and per-step resource counters
 * (buffers and bind groups constant, one submit per step), also with the KV pool split
 * into one K/V buffer pair per layer and the prefill run in row blocks (a binding cap
 * forces both at test scale), and with an f16 pool on both backends. The real backbones'
 * decoder shapes in miniature (Voxtral: head_dim ≠ hidden/heads, 4-token prefix;
 * Qwen2.5-Omni: GQA 16:2 with q/k/v biases; Qwen2-Audio: MHA with biases) run 64 steps
 * after 300 audio tokens, under the full cache and under WnW at r_GPU 0.2 (the policy
 * decides on the CPU run, the GPU run replays its plans), and both backends prefilling
 * layer by layer (each layer's plan placed before the next runs: WnW on the Voxtral shape,
 * also with another prompt in the session options, with an f32 and an f16 pool, the full cache on a long prompt in row blocks), with the GPU's allocation peak under
 * what the whole-prompt path's buffers alone take. The Voxtral shape with f16 and
 * with q4 weights (the CPU decodes the dequantised matrices the GPU reads) under both, and
 * with a vocabulary whose q4 embedding and lm_head a binding cap splits into two row
 * parts each. A recording's next request: the text rewound to the prompt's end and decoded
 * again (full cache, pipelined, the text's pages grown one at a time; WnW). The shipped-model cases
 * compare both backends with the training code's golden tokens; they skip until
 * public/models/wnw-ref and its fixtures exist.
 */
import { gpuChecks } from './gpu-checks.js';

const CHECKS = [
  'context_too_long',
  'bench_smoke',
  'step_calls',
  'parity_reference_random',
  'parity_sharded_pool',
  'parity_f16_pool',
  'parity_voxtral_shape_full',
  'parity_voxtral_shape_wnw',
  'parity_voxtral_shape_wnw_layered',
  'parity_voxtral_shape_wnw_prompt',
  'parity_voxtral_shape_wnw_layered_f16',
  'parity_voxtral_shape_wnw_summary_mass',
  'parity_reference_full_layered',
  'parity_qwen2_5_omni_shape_full',
  'parity_qwen2_5_omni_shape_wnw',
  'parity_qwen2_audio_shape_full',
  'parity_qwen2_audio_shape_wnw',
  'parity_voxtral_shape_f16_full',
  'parity_voxtral_shape_f16_wnw',
  'parity_voxtral_shape_q4_full',
  'parity_voxtral_shape_q4_wnw',
  'parity_voxtral_shape_q4_prepacked',
  'parity_qwen2_audio_shape_q4_wnw',
  'parity_q4_split_head_full',
  'parity_q4_split_head_wnw',
  'parity_q4_split_head_wnw_layered',
  'parity_shipped_clip1',
  'parity_shipped_clip2',
  'parity_text_growth',
  'parity_pipelined_policy',
  'parity_pipelined_voxtral_full',
  'parity_pipelined_voxtral_wnw_lag2',
  'parity_voxtral_wnw_chunks_only',
  'parity_rewind_pipelined_full',
  'parity_rewind_wnw',
];

gpuChecks('decoder', CHECKS);
