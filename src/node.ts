/**
 * wnw/node: the page's entry (`wnw`) for Node scripts. Importing it installs what only Node
 * does (src/platform/node-host.ts): model folders and audio files read from disk paths,
 * MP3/FLAC/Ogg/M4A decoded, onnxruntime-web's wasm found on disk, and WebGPU through Dawn
 * (the optional `webgpu` package) where a hardware adapter answers a probe in a child
 * process; elsewhere the CPU backend. Every name of `wnw` is here too, and `wnw` imported
 * beside it in the same script works the same.
 */
import './platform/node-host.js';

export * from './index.js';
