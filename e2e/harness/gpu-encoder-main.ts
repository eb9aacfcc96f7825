/** Entry of gpu-encoder.html: exposes the audio encoder's GPU checks as window.wnwGpu. */
import { encoderTests, setMiniatures } from './gpu-encoder.js';
import { exposeChecks } from './gpu-util.js';

// A source edit during a run is taken here rather than by a full page reload, which would
// end the running check.
import.meta.hot?.accept(() => {});

exposeChecks(encoderTests, { setMiniatures });
