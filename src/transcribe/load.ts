/**
 * The page's loader: the same load as `WnwTranscriber`'s, typed as the `Transcriber` a page
 * uses whichever thread it runs on (`loadTranscriberInWorker` returns the same interface).
 * The research members (`encode`, `decodeEncoded`, the live host) stay on the class, which
 * `wnw/research` loads as `loadWnwTranscriber`.
 */
import type { LoadOptions, Transcriber } from '../types.js';
import { loadTranscriber as loadWnwTranscriber } from './transcriber.js';

/** Loads the model, its audio route and a decoder backend in this thread. */
export function loadTranscriber(options: LoadOptions): Promise<Transcriber> {
  return loadWnwTranscriber(options);
}
