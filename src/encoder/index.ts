export { WhisperEncoder, type TensorLookup, type MelInput, type EncoderOutput } from './whisper.js';
export {
  parseWhisperEncoderConfig,
  type WhisperEncoderConfig,
  type WhisperFamilySpec,
  type PostStep,
} from './whisper-config.js';
export { lookupFromSafeTensors, lookupFromCheckpoint } from './tensors.js';
export { WebGpuWhisperEncoder, asStored } from './webgpu.js';
export {
  encoderLinears,
  encoderWeightBytes,
  encodeBatch,
  linearFormat,
  towerBytes,
  type TowerBytes,
} from './sizing.js';
