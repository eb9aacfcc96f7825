import { defineConfig, type Plugin } from 'vite';
import { resolve } from 'node:path';
// The extension is spelled out: Vite's native config loader (its future default) needs it.
import { samplesPlugin } from './src/ui/samples-plugin.ts';

// The wasm audio decoders serve Node only (src/audio/node-decode.ts, imported only there):
// the library leaves them to the consumer's node_modules as it does onnxruntime-web, and the
// demo leaves that module out altogether (a page never runs it).
const AUDIO_DECODERS = [
  'mpg123-decoder',
  '@wasm-audio-decoders/flac',
  'ogg-opus-decoder',
  '@wasm-audio-decoders/ogg-vorbis',
];
// Node's optional peers (Dawn, the archive queue's Redis clients) stay the consumer's to install.
const LIB_EXTERNAL = [
  'onnxruntime-web',
  'onnxruntime-web/webgpu',
  'webgpu',
  'bullmq',
  'ioredis',
  'tsx',
  /^node:/,
  ...AUDIO_DECODERS,
];
const DEMO_EXTERNAL = [/\/src\/audio\/node-decode\.ts$/];

/**
 * The library's worker is an entry of its own (dist/lib/worker.js), and the published code starts it with the
 * pattern every bundler follows, `new Worker(new URL('./worker.js', import.meta.url), { type:
 * 'module' })`, so a consumer's bundler emits it beside the app. Vite would otherwise build
 * it here into an absolute `/assets/worker-<hash>.js` URL that no consumer serves: the
 * source's URL is hidden from Vite's worker transform while the library builds, and written
 * back as the literal once the chunks are rendered.
 */
function publishedWorkerUrl(): Plugin {
  const source = "new URL('./worker.ts', import.meta.url)";
  // The module that starts each worker, and the entry's file name the published URL names.
  const starters: Record<string, string> = {
    '/src/worker/client.ts': 'worker.js',
  };
  return {
    name: 'wnw-published-worker-url',
    enforce: 'pre',
    transform(code, id) {
      const starter = Object.keys(starters).find((s) => id.endsWith(s));
      if (!starter) return null;
      if (!code.includes(source)) throw new Error(`${starter.slice(1)} no longer starts its worker with ${source}`);
      return code.replace(source, `new URL('./' + '${starters[starter]}', import.meta.url)`);
    },
    renderChunk(code) {
      const rendered = /new URL\((["'])\.\/\1 \+ (["'])((?:calibrate-)?worker\.js)\2, import\.meta\.url\)/g;
      return rendered.test(code)
        ? code.replace(rendered, (_m, _a, _b, file) => `new URL("./${file}", import.meta.url)`)
        : null;
    },
  };
}

// `vite` serves the demo page, the example page and the e2e harness pages;
// `vite build` builds the demo; `vite build --mode lib` builds the ES modules (wnw and wnw/research).
export default defineConfig(({ mode }) => ({
  // /samples.json: the shipped clips the demo offers (see src/ui/samples-plugin.ts).
  plugins: mode === 'lib' ? [publishedWorkerUrl()] : [samplesPlugin()],
  // Files the tests write while the pages run (miniature models, reports) are data, never modules: not watched.
  server: {
    host: '127.0.0.1',
    port: 5173,
    strictPort: false,
    fs: { allow: ['.'] },
    watch: { ignored: ['**/.cache/**', '**/test-results/**', '**/e2e/.out/**'] },
  },
  // onnxruntime-web ships its own wasm loader; pre-bundling breaks its relative imports.
  // The tokenizer libraries are pre-bundled at start: discovered later, by the first page that
  // imports them, they would make Vite reload every open page (a test page mid-run included).
  optimizeDeps: { exclude: ['onnxruntime-web'], include: ['@huggingface/tokenizers', '@huggingface/jinja'] },
  assetsInclude: ['**/*.wgsl'],
  // The library's worker chunk must leave onnxruntime-web to the consumer's bundler as the main
  // chunk does; otherwise both of ORT's bundles are inlined into it (~150 MB).
  worker: { format: 'es', rollupOptions: { external: mode === 'lib' ? LIB_EXTERNAL : DEMO_EXTERNAL } },
  // The library ships code only: models and test audio are fetched from where the page puts them.
  publicDir: mode === 'lib' ? false : 'public',
  build:
    mode === 'lib'
      ? {
          outDir: 'dist/lib',
          // The entries by where they run: wnw (a page or a worker), research, node (Node scripts), and
          // the workers and the CLI; the code they share goes into chunks that each imports, so a
          // module only Node reaches lands only in chunks only Node entries import.
          lib: {
            entry: {
              wnw: resolve(import.meta.dirname, 'src/index.ts'),
              research: resolve(import.meta.dirname, 'src/research.ts'),
              node: resolve(import.meta.dirname, 'src/node.ts'),
              worker: resolve(import.meta.dirname, 'src/worker/worker.ts'),
              cli: resolve(import.meta.dirname, 'src/cli/main.ts'),
              // The archive queue's worker thread (src/archive/queue-worker.ts starts it by this name).
              'transcription-thread': resolve(import.meta.dirname, 'src/archive/transcription-thread.ts'),
            },
            formats: ['es'],
            fileName: (_format, name) => `${name}.js`,
          },
          rollupOptions: { external: LIB_EXTERNAL },
        }
      : {
          outDir: 'dist/demo',
          rollupOptions: {
            input: {
              main: resolve(import.meta.dirname, 'index.html'),
              example: resolve(import.meta.dirname, 'example.html'),
            },
            external: DEMO_EXTERNAL,
          },
        },
  test: {
    include: ['test/**/*.test.ts'],
    // removes the folders test/helpers/temp.ts made once each file ends
    setupFiles: ['test/setup.ts'],
    testTimeout: 120_000,
    pool: 'forks',
    fileParallelism: false,
  },
}));
