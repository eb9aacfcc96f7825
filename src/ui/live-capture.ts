/**
 * The microphone as 16 kHz mono Float32 chunks, for a live recording: getUserMedia into an
 * AudioContext, an AudioWorklet that posts blocks of about a quarter second, and the
 * project's band-limited resampler when the context does not run at 16 kHz.
 */
import { StreamResampler } from '../index.js';

export interface Capture {
  /** The rate the browser captures at (16000 where it honoured the request, then nothing is resampled). */
  readonly contextRate: number;
  /** Stops the microphone; the samples still held (the worklet's last block, the resampler's tail) come out first. */
  stop(): Promise<void>;
}

const RATE = 16000;

/**
 * Buffers the input into blocks (a message per 128-frame render quantum would be hundreds a
 * second) and sends the part block on a 'flush' message. The node is set to one channel, so
 * the graph downmixes a stereo microphone before it arrives here.
 */
const WORKLET = `
registerProcessor('wnw-capture', class extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.size = options.processorOptions.block;
    this.block = new Float32Array(this.size);
    this.n = 0;
    this.port.onmessage = () => {
      this.port.postMessage({ samples: this.block.slice(0, this.n), last: true });
      this.n = 0;
    };
  }
  process(inputs) {
    const x = inputs[0] && inputs[0][0];
    if (!x) return true;
    for (let i = 0; i < x.length; i++) {
      this.block[this.n++] = x[i];
      if (this.n === this.size) {
        // Transferred: the block sent is detached here (its length 0), so the size is kept apart.
        this.port.postMessage({ samples: this.block, last: false }, [this.block.buffer]);
        this.block = new Float32Array(this.size);
        this.n = 0;
      }
    }
    return true;
  }
});
`;

/** Whether this browser can capture live audio (a secure page with getUserMedia and AudioWorklet). */
export function canCapture(): boolean {
  return !!navigator.mediaDevices?.getUserMedia && typeof AudioWorkletNode !== 'undefined';
}

/**
 * Starts the microphone; `onChunk` gets 16 kHz mono samples, in order, each array its own.
 * Rejects (with the browser's error) when the microphone is refused or missing.
 */
export async function captureMicrophone(onChunk: (samples: Float32Array) => void): Promise<Capture> {
  const stream = await navigator.mediaDevices.getUserMedia({
    audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false },
  });
  let ctx: AudioContext | null = null;
  try {
    ctx = new AudioContext({ sampleRate: RATE });
    let source: MediaStreamAudioSourceNode;
    try {
      source = ctx.createMediaStreamSource(stream);
    } catch {
      // Firefox cannot connect a microphone to a context at another rate than the device's: capture at the device's.
      void ctx.close();
      ctx = new AudioContext();
      source = ctx.createMediaStreamSource(stream);
    }
    const url = URL.createObjectURL(new Blob([WORKLET], { type: 'text/javascript' }));
    try {
      await ctx.audioWorklet.addModule(url);
    } finally {
      URL.revokeObjectURL(url);
    }
    const resampler = new StreamResampler(ctx.sampleRate, RATE);
    const node = new AudioWorkletNode(ctx, 'wnw-capture', {
      numberOfInputs: 1,
      numberOfOutputs: 1,
      channelCount: 1,
      channelCountMode: 'explicit',
      channelInterpretation: 'speakers',
      processorOptions: { block: Math.round(ctx.sampleRate / 4) },
    });
    let flushed: (() => void) | null = null;
    node.port.onmessage = (e: MessageEvent<{ samples: Float32Array; last: boolean }>) => {
      // Each block is new (transferred from the worklet, or the resampler's fresh output): the caller may keep it.
      const y = resampler.push(e.data.samples);
      if (y.length) onChunk(y);
      if (!e.data.last) return;
      const tail = resampler.end();
      if (tail.length) onChunk(tail);
      flushed?.();
    };
    source.connect(node);
    // Rendered only while it leads to the destination; it writes silence there.
    node.connect(ctx.destination);
    // A context made after an await may start suspended (autoplay policy); the click that started it allows it.
    await ctx.resume();
    const running = ctx;
    return {
      contextRate: running.sampleRate,
      async stop() {
        stream.getTracks().forEach((t) => t.stop());
        // A closed or stuck context never answers the flush: give it a moment, not forever.
        await Promise.race([
          new Promise<void>((resolve) => ((flushed = resolve), node.port.postMessage('flush'))),
          new Promise<void>((resolve) => setTimeout(resolve, 1000)),
        ]);
        node.port.onmessage = null;
        source.disconnect();
        node.disconnect();
        await running.close();
      },
    };
  } catch (e) {
    stream.getTracks().forEach((t) => t.stop());
    void ctx?.close();
    throw e;
  }
}
