import { defineConfig } from 'vite';
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
const LIB_EXTERNAL = ['onnxruntime-web', 'onnxruntime-web/webgpu', 'webgpu', /^node:/, ...AUDIO_DECODERS];
const DEMO_EXTERNAL = [/\/src\/audio\/node-decode\.ts$/];

// `vite` serves the demo page, the example page and the e2e harness pages;
// `vite build` builds the demo; `vite build --mode lib` builds the ES modules (wnw and wnw/research).
export default defineConfig(({ mode }) => ({
  // /samples.json: the shipped clips the demo offers (see src/ui/samples-plugin.ts).
  plugins: [samplesPlugin()],
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
          // Two entries (package.json's "." and "./research"): the code they share goes into chunks both import.
          lib: {
            entry: {
              wnw: resolve(import.meta.dirname, 'src/index.ts'),
              research: resolve(import.meta.dirname, 'src/research.ts'),
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
