/**
 * The whole decoder on WebGPU (headless Chromium, SwiftShader here) against the CPU
 * backend: identical greedy tokens for 64 decode steps after a prefill of > 1,000 audio
 * tokens, the same prefill plan and mid-decode recall/release plans on both, exported
 * weights and queries within attention tolerance, and per-step resource counters
 * (buffers and bind groups constant, one submit per step), also with the KV pool split
 * into one K/V buffer pair per layer and the prefill run in row blocks (a binding cap
 * forces both at test scale), and with an f16 pool on both backends. The shipped-model cases
 * compare both backends with the training code's golden tokens; they skip until
 * public/models/wnw-ref and its fixtures exist.
 */
import { gpuChecks } from './gpu-checks.js';

const CHECKS = ['context_too_long', 'bench_smoke', 'parity_reference_random', 'parity_sharded_pool', 'parity_f16_pool', 'parity_shipped_clip1', 'parity_shipped_clip2'];

gpuChecks('decoder', CHECKS);
