/** Entry of gpu.html: exposes every GPU check to the Playwright specs as window.wnwGpu. */
import { denseTests } from './gpu-kernels.js';
import { attentionTests } from './gpu-attention.js';
import { decoderTests } from './gpu-decoder-cases.js';
import { hfTests } from './gpu-hf-cases.js';
import { weightKernelTests } from './gpu-weight-kernels.js';
import { chunkSelectTests } from './gpu-chunk-select.js';
import { focusTests } from './gpu-focus.js';
import { scatterTests } from './gpu-scatter.js';
import { exposeChecks } from './gpu-util.js';

// A source edit during a run is taken here rather than by a full page reload, which would
// end the running check.
import.meta.hot?.accept(() => {});

exposeChecks({
  ...denseTests,
  ...attentionTests,
  ...decoderTests,
  ...weightKernelTests,
  ...hfTests,
  ...chunkSelectTests,
  ...focusTests,
  ...scatterTests,
});
