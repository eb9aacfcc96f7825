/**
 * What the Llama and Qwen2 families share: the Hugging Face decoder's tensor names,
 * reading nested config objects, the Whisper feature extractor's window and the English
 * language names the prompt instructions use.
 */
import type { HfFamily, Json } from './types.js';

/** One Whisper feature-extractor window: 30 s at 16 kHz (3000 mel frames). */
export const THIRTY_SECONDS = 480_000;

/** English names for the instructions that name a language; a code without one is named by itself. */
const LANGUAGE_NAMES: Record<string, string> = {
  en: 'English',
  zh: 'Chinese',
  de: 'German',
  fr: 'French',
  es: 'Spanish',
  it: 'Italian',
  ja: 'Japanese',
  ko: 'Korean',
  ru: 'Russian',
  pt: 'Portuguese',
  nl: 'Dutch',
  ar: 'Arabic',
  hi: 'Hindi',
};

export const languageName = (code: string): string => LANGUAGE_NAMES[code] ?? code;

/** A config.json field is missing or malformed; the loader adds the file name. */
export class ConfigFieldError extends Error {}

export function obj(j: Json, key: string): Json {
  const v = j[key];
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new ConfigFieldError(`field "${key}" must be an object`);
  return v as Json;
}

/** An integer id from `j[key]` (a list counts by its first entry), or `fallback`. */
export function tokenId(j: Json, key: string, fallback: number): number {
  const v = j[key];
  const first = Array.isArray(v) ? v[0] : v;
  return typeof first === 'number' && Number.isInteger(first) ? first : fallback;
}

/** The id the first of `sources` that states `key` gives (see tokenId), or `fallback`. */
export function firstTokenId(sources: readonly (Json | undefined)[], key: string, fallback: number): number {
  for (const s of sources) {
    const id = s ? tokenId(s, key, -1) : -1;
    if (id >= 0) return id;
  }
  return fallback;
}

/** Every integer id in `j[key]` (a number or a list of numbers). */
export function tokenIds(j: Json, key: string): number[] {
  const v = j[key];
  const list = Array.isArray(v) ? v : [v];
  return list.filter((t): t is number => typeof t === 'number' && Number.isInteger(t));
}

/**
 * Our internal decoder names (decoderTensorShapes) mapped to the upstream Llama/Qwen2
 * module names under `family.decoderPrefix`; the lm_head sits outside that prefix.
 */
const LAYER_NAMES: Record<string, string> = {
  'attn_norm.weight': 'input_layernorm.weight',
  'q_proj.weight': 'self_attn.q_proj.weight',
  'k_proj.weight': 'self_attn.k_proj.weight',
  'v_proj.weight': 'self_attn.v_proj.weight',
  'o_proj.weight': 'self_attn.o_proj.weight',
  'q_proj.bias': 'self_attn.q_proj.bias',
  'k_proj.bias': 'self_attn.k_proj.bias',
  'v_proj.bias': 'self_attn.v_proj.bias',
  'mlp_norm.weight': 'post_attention_layernorm.weight',
  'gate_proj.weight': 'mlp.gate_proj.weight',
  'up_proj.weight': 'mlp.up_proj.weight',
  'down_proj.weight': 'mlp.down_proj.weight',
};

export function upstreamTensorName(family: HfFamily, internal: string): string {
  if (internal === 'lm_head.weight') return family.lmHead;
  if (internal === 'embed_tokens.weight' || internal === 'norm.weight') return family.decoderPrefix + internal;
  const m = /^layers\.(\d+)\.(.+)$/.exec(internal);
  const tail = m && LAYER_NAMES[m[2]];
  if (!m || !tail) throw new Error(`no upstream name for decoder tensor ${internal}`);
  return `${family.decoderPrefix}layers.${m[1]}.${tail}`;
}

/** Whether an upstream tensor belongs to the decoder (its prefix, or the lm_head). */
export function isDecoderTensor(family: HfFamily, name: string): boolean {
  return name.startsWith(family.decoderPrefix) || name === family.lmHead;
}
