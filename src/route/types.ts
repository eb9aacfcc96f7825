/** What every audio route is: 16 kHz samples in, the decoder's audio embeddings out. */

export interface RouteOptions {
  signal?: AbortSignal;
  /** Examples (or ONNX windows) done out of the total; `note` says something the user should know. */
  onProgress?: (done: number, total: number, note?: string) => void;
}

export interface RouteOutput {
  /** [audioLength, hiddenSize], row-major. */
  embeddings: Float32Array;
  audioLength: number;
}

export interface AudioRoute {
  /** 'onnx' or 'whisper', and where the encoder runs, for readouts. */
  readonly kind: 'onnx' | 'whisper';
  readonly label: string;
  /** Bytes of the encoder's weights as held for encoding (f32 for an audio tower; the ONNX graph's size). */
  readonly weightBytes: number;
  encode(samples: Float32Array, opts?: RouteOptions): Promise<RouteOutput>;
  dispose(): void | Promise<void>;
}
