/**
 * Prompt and answer token ids of the calibration clips for a Hugging Face folder, written
 * for training/head_sensitivity.py: the Head Sensitivity is computed in PyTorch but must
 * see exactly the prompt and tokenisation the runtime decodes with, and Python has no
 * reader for every tokenizer format the runtime accepts. Reads config.json and the
 * tokenizer files only, never the weights.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readJson } from '../model/files.js';
import { readHfConfig } from '../model/hf/load.js';
import { loadHfText } from '../model/hf/text.js';
import { listCalibrationClips } from './clips.js';
import { ModelLoadError } from '../index.js';

export interface AnswerIds {
  model_type: string;
  /** Ids before the audio embeddings, and after them up to where the answer starts. */
  prefix: number[];
  instruction: number[];
  /** Per clip: the transcript's ids followed by the model's eos (the answer the CE is taken on). */
  clips: Array<{ id: string; wav: string; answer: number[] }>;
}

export async function answerIds(
  modelDir: string,
  clipsDir: string,
  limit: number,
  language?: string,
): Promise<AnswerIds> {
  const configFile = join(modelDir, 'config.json');
  const json = (await readJson(configFile)) as Record<string, unknown>;
  if (typeof json['model_type'] !== 'string')
    throw new ModelLoadError(
      configFile,
      'has no model_type: --export-ids is for Hugging Face folders (our own model folders ship their token ids in the clips)',
    );
  const info = await readHfConfig(modelDir, json);
  const text = await loadHfText(modelDir, info.family, info.config, info.audioTokenId, language);
  const eos = text.stopTokens[0];
  const clips = await listCalibrationClips(clipsDir, limit);
  return {
    model_type: info.family.modelType,
    prefix: text.prefix,
    instruction: text.instruction,
    clips: clips.map((c) => ({
      id: c.id,
      wav: c.wav,
      answer: [...text.tokenizer.encode(c.text, { bos: false, eos: false }), eos],
    })),
  };
}

export async function writeAnswerIds(
  out: string,
  modelDir: string,
  clipsDir: string,
  limit: number,
  language?: string,
): Promise<void> {
  const ids = await answerIds(modelDir, clipsDir, limit, language);
  writeFileSync(out, JSON.stringify(ids) + '\n');
  process.stderr.write(`calibrate: wrote prompt and answer ids of ${ids.clips.length} clips to ${out}\n`);
}
