/**
 * `npm run analyze-attention -- [--data public/test-sets/espeak-heldout] [--model DIR] [--limit N] [--json]`
 *
 * The prefill/decode mismatch of the WnW paper (§2.1) on our model: for every KV head,
 * the attention of the first answer token's query at prefill (the last prompt row)
 * against the attention summed over all decode steps of a full-cache greedy run.
 * Reports the share of each on the first 10 % of the audio, and the top-K Jaccard
 * overlap of the two rankings (K = 100, 500; random ≈ K / T) with its per-head spread.
 */
// Installs what only Node does (disk files, Dawn, the audio decoders): this module runs only in Node.
import '../platform/node-host.js';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createBackend } from '../backend/create.js';
import { logMel } from '../audio/mel.js';
import { isStop, kvHeadCount } from '../model/config.js';
import { AudioEncoder } from '../model/encoder.js';
import { loadModel } from '../model/loader.js';
import { topK } from '../policy/select.js';
import { toMono16k } from '../index.js';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : dflt;
}

export function headShareOfFirst(w: Float32Array, fraction = 0.1): number {
  const cut = Math.max(1, Math.floor(w.length * fraction));
  let a = 0;
  let s = 0;
  for (let i = 0; i < w.length; i++) {
    s += w[i];
    if (i < cut) a += w[i];
  }
  return s > 0 ? a / s : 0;
}

export function jaccardTopK(a: Float32Array, b: Float32Array, k: number): number {
  const kk = Math.min(k, a.length);
  const sa = new Set(topK(a, kk));
  const sb = topK(b, kk);
  let inter = 0;
  for (const x of sb) if (sa.has(x)) inter++;
  return inter / (2 * kk - inter);
}

const quantiles = (xs: number[]) => {
  const s = [...xs].sort((x, y) => x - y);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { min: s[0], p25: q(0.25), median: q(0.5), p75: q(0.75), max: s[s.length - 1] };
};

async function main(): Promise<void> {
  const dataDir = arg('data', 'public/test-sets/espeak-heldout');
  const modelDir = arg('model', 'public/models/wnw-ref');
  const limit = Number(arg('limit', '4'));
  const model = await loadModel(modelDir);
  const c = model.config;
  const encoder = await AudioEncoder.create(model.encoderBytes, c);
  const backend = await createBackend(c, model.weights, {}, { kind: 'cpu' });
  const heads = kvHeadCount(c);
  const all = Array.from({ length: heads }, (_, h) => h);
  const files = (await readdir(dataDir))
    .filter((f) => f.endsWith('.wav'))
    .sort()
    .slice(0, limit);
  const pre10: number[] = [];
  const dec10: number[] = [];
  const jac100: number[] = [];
  const jac500: number[] = [];
  const randomJ: number[] = [];
  for (const f of files) {
    const samples = await toMono16k(new Uint8Array(await readFile(join(dataDir, f))), c.audio.sampleRate);
    const mel = logMel(samples, c.audio);
    const N = Math.floor(mel.frames / c.audio.framesPerToken);
    const emb = await encoder.encode(mel.data, mel.frames);
    const maxNew = Math.ceil((6 * samples.length) / c.audio.sampleRate);
    const stage = backend.open({
      audioLength: N,
      maxNewTokens: maxNew + 1,
      request: { decodeHeads: all, prefillQueries: 1 },
    });
    const pre = await stage.prefill(emb);
    const full = Int32Array.from({ length: N }, (_, i) => i);
    const session = await pre.place({ heads: all.map(() => ({ gpu: full, cpu: new Int32Array(0) })) });
    const cum = all.map(() => new Float32Array(N));
    let token = pre.token;
    let steps = 0;
    while (!isStop(c, token) && steps < maxNew) {
      const r = await session.step(token);
      r.observation.weights.forEach((w, h) => {
        for (let p = 0; p < N; p++) cum[h][p] += w[p];
      });
      token = r.token;
      steps++;
    }
    session.close();
    for (let h = 0; h < heads; h++) {
      pre10.push(headShareOfFirst(pre.observation.scores[h]));
      dec10.push(headShareOfFirst(cum[h]));
      jac100.push(jaccardTopK(pre.observation.scores[h], cum[h], 100));
      jac500.push(jaccardTopK(pre.observation.scores[h], cum[h], 500));
    }
    const k = Math.min(100, N);
    randomJ.push(k / (2 * N - k));
    process.stderr.write(`analyze-attention: ${f} (${N} audio tokens, ${steps} steps)\n`);
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const result = {
    clips: files.length,
    prefillShareFirst10pct: mean(pre10),
    decodeShareFirst10pct: mean(dec10),
    jaccardTop100: mean(jac100),
    jaccardTop500: mean(jac500),
    jaccardTop100Random: mean(randomJ),
    perHeadJaccardTop100: quantiles(jac100),
    paper: { prefillShareFirst10pct: 0.479, decodeShareFirst10pct: 0.098, jaccardTop100: 0.187, jaccardTop500: 0.24 },
  };
  if (process.argv.includes('--json')) {
    console.log(JSON.stringify(result, null, 1));
  } else {
    const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
    console.log(`| measure (${files.length} clips of ${dataDir}, all ${heads} KV heads) | ours | paper |`);
    console.log('|---|---|---|');
    console.log(
      `| prefill attention (first answer token) on the first 10 % of audio | ${pct(result.prefillShareFirst10pct)} | 47.9 % |`,
    );
    console.log(
      `| decode attention (summed over steps) on the first 10 % of audio | ${pct(result.decodeShareFirst10pct)} | 9.8 % |`,
    );
    console.log(
      `| top-100 Jaccard, prefill vs decode ranking (random ≈ ${result.jaccardTop100Random.toFixed(3)}) | ` +
        `${result.jaccardTop100.toFixed(3)} | 0.187 |`,
    );
    console.log(`| top-500 Jaccard | ${result.jaccardTop500.toFixed(3)} | 0.240 |`);
    const q = result.perHeadJaccardTop100;
    console.log(
      '| per-head top-100 Jaccard: min / p25 / median / p75 / max | ' +
        `${[q.min, q.p25, q.median, q.p75, q.max].map((x) => x.toFixed(2)).join(' / ')} | |`,
    );
  }
  await encoder.dispose();
}

main().catch((e) => {
  console.error(`analyze-attention: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
