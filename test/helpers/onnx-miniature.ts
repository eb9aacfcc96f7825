/**
 * The Voxtral miniature's audio tower and projector exported as an onnx-community style ONNX
 * audio encoder (training/hf/onnx_encoder.py), with the variants a loader must refuse, written
 * once per content of the scripts and miniature and cached under .cache/onnx-encoder/<hash>/.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { miniature, PY } from './miniatures.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SCRIPTS = ['training/hf/onnx_encoder.py', 'training/hf/encoder_ref.py'];

/** The .onnx files; external/ holds audio_encoder.onnx with its weights in audio_encoder.onnx_data. */
export type OnnxVariant = 'audio_encoder' | 'audio_encoder_flat' | 'bad_input' | 'bad_width';

/** The folder holding `<variant>.onnx` for each variant (exported on first use). */
export async function ensureOnnxEncoders(): Promise<string> {
  const model = await miniature('voxtral');
  const h = createHash('sha256').update(basename(dirname(model)));
  for (const s of SCRIPTS) h.update(s).update(readFileSync(join(ROOT, s)));
  const dir = join(ROOT, '.cache', 'onnx-encoder', h.digest('hex').slice(0, 16));
  if (existsSync(join(dir, '.complete'))) return dir;
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  execFileSync(PY, [join(ROOT, 'training/hf/onnx_encoder.py'), '--model', model, '--out', tmp], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  writeFileSync(join(tmp, '.complete'), new Date().toISOString());
  if (existsSync(join(dir, '.complete'))) rmSync(tmp, { recursive: true, force: true });
  else {
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
  }
  return dir;
}
