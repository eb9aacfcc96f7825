/** The valid folders every case starts from, written once per run. */
import { join } from 'node:path';
import { writeTinyModel } from '../../test/helpers/tiny-model.js';
import { MINIATURE_FAMILIES, ensureMiniatures } from '../../test/helpers/miniatures.js';
import { scratchDir, type Bases } from './cases.js';

/** The tiny model (our format, with heads.json) and the Hugging Face miniatures (voxtral, qwen2_audio, qwen2_5_omni). */
export async function makeBases(tag: string): Promise<Bases> {
  const root = await ensureMiniatures();
  return { tiny: writeTinyModel(), hf: MINIATURE_FAMILIES.map((f) => join(root, f)), scratch: scratchDir(tag) };
}
