/**
 * A Vite plugin that lists the shipped clips (`public/samples/*`, `public/test-sets/<set>/*`)
 * as `/samples.json`: computed on each request by the dev server and written into the
 * build. The clips are produced by the training pipeline and change; a generated list
 * cannot go stale, and an absent folder simply yields fewer entries.
 */
import { existsSync, openSync, readSync, closeSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Plugin } from 'vite';

export interface SampleEntry {
  /** URL relative to the site root, e.g. "test-sets/flite/flite_awb.wav". */
  url: string;
  /** The folder: "samples" or the test set's name. */
  group: string;
  name: string;
  /** Duration read from the WAV header; null for other formats. */
  seconds: number | null;
  /** URL of the same-named .txt reference, when there is one. */
  reference: string | null;
}

/** The calibration set (repository root), copied into the demo's build under the same name. */
const CALIBRATION = 'calibration-data';

const AUDIO = /\.(wav|mp3|ogg|opus|flac|m4a)$/i;

/** Duration from a RIFF/WAVE header (fmt byte rate and data size), reading only the first 4 KiB. */
export function wavSeconds(path: string): number | null {
  const fd = openSync(path, 'r');
  try {
    const head = Buffer.alloc(4096);
    const n = readSync(fd, head, 0, head.length, 0);
    if (n < 12 || head.toString('ascii', 0, 4) !== 'RIFF' || head.toString('ascii', 8, 12) !== 'WAVE') return null;
    let byteRate = 0;
    for (let p = 12; p + 8 <= n;) {
      const id = head.toString('ascii', p, p + 4);
      const size = head.readUInt32LE(p + 4);
      if (id === 'fmt ' && p + 16 <= n) byteRate = head.readUInt32LE(p + 16);
      if (id === 'data') {
        // Streams written without knowing their length put 0 or 0xffffffff here: use the file size.
        const dataBytes = size === 0 || size === 0xffffffff ? statSync(path).size - (p + 8) : size;
        return byteRate > 0 ? dataBytes / byteRate : null;
      }
      p += 8 + size + (size & 1);
    }
    return null;
  } finally {
    closeSync(fd);
  }
}

export function listSamples(publicDir: string): SampleEntry[] {
  const out: SampleEntry[] = [];
  const scan = (dir: string, urlDir: string, group: string) => {
    if (!existsSync(dir)) return;
    for (const name of readdirSync(dir).sort()) {
      if (!AUDIO.test(name)) continue;
      const base = name.replace(AUDIO, '');
      const ref = existsSync(join(dir, `${base}.txt`)) ? `${urlDir}/${base}.txt` : null;
      out.push({
        url: `${urlDir}/${name}`,
        group,
        name: base,
        seconds: /\.wav$/i.test(name) ? wavSeconds(join(dir, name)) : null,
        reference: ref,
      });
    }
  };
  scan(join(publicDir, 'samples'), 'samples', 'samples');
  const sets = join(publicDir, 'test-sets');
  if (existsSync(sets)) {
    for (const set of readdirSync(sets).sort()) {
      if (statSync(join(sets, set)).isDirectory()) scan(join(sets, set), `test-sets/${set}`, set);
    }
  }
  return out;
}

export function samplesPlugin(): Plugin {
  let publicDir = 'public';
  return {
    name: 'wnw-samples-manifest',
    // The library build ships no demo assets.
    apply: (_config, env) => env.mode !== 'lib',
    configResolved(config) {
      publicDir = config.publicDir || publicDir;
    },
    configureServer(server) {
      server.middlewares.use('/samples.json', (_req, res) => {
        res.setHeader('Content-Type', 'application/json');
        res.setHeader('Cache-Control', 'no-store');
        res.end(JSON.stringify(listSamples(publicDir)));
      });
    },
    generateBundle() {
      this.emitFile({
        type: 'asset',
        fileName: 'samples.json',
        source: JSON.stringify(listSamples(publicDir), null, 1),
      });
      // The demo's "calibrate for WnW" fetches the calibration set beside the page (the dev server serves it from the repository).
      if (existsSync(CALIBRATION)) {
        for (const name of readdirSync(CALIBRATION)) {
          if (/\.(wav|json)$/.test(name))
            this.emitFile({
              type: 'asset',
              fileName: `${CALIBRATION}/${name}`,
              source: readFileSync(join(CALIBRATION, name)),
            });
        }
      }
    },
  };
}
