/** The audio front-end: decoding, downmix, resampling to 16 kHz, log-mel features. */
export { parseWav, isWav, encodeWav, type DecodedAudio } from './wav.js';
export { resample, resampledLength, type ResampleOptions } from './resample.js';
export { downmix } from './downmix.js';
export { toMono16k, canDecodeCompressed, type AudioSource, type AudioBufferLike } from './decode.js';
export { LogMel, logMel, melFilterbank, frameCount, hzToMel, melToHz, type MelParams } from './mel.js';
export { RealFft } from './fft.js';
