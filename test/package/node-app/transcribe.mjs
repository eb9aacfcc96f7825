// A Node script as a new user writes it: `wnw` for the API, `wnw/node` for disk files (and
// Dawn where a GPU is); the model is the one the package ships.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { loadTranscriber } from 'wnw';
import 'wnw/node';

const model = join(dirname(createRequire(import.meta.url).resolve('wnw/package.json')), 'public/models/wnw-ref');
const asr = await loadTranscriber({ model });
const r = await asr.transcribe(await readFile(process.argv[2]));
asr.dispose();
process.stdout.write(JSON.stringify({ text: r.text, backend: asr.backend, backendReason: asr.backendReason }) + '\n');
