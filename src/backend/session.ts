/**
 * The stages of a session, shared by both backends. A backend supplies its parts (how it
 * prefills, places and frees); the stage objects around them carry the order of calls in
 * their types: a prefill stage has no step, a prefilled session only places, and only the
 * placement makes a `DecodeSession`. What a type cannot say is that a stage is used once
 * and that nothing runs after `close`: `Lifetime` is that one check.
 */
import type { LayerPrefill, PrefillObservation, PrefillPlan } from '../kv/plan.js';
import { segmentLength, type ModelConfig } from '../model/config.js';
import { CompiledReadouts, type BackendRequest } from './readouts.js';
import type {
  DecodeSession,
  LayeredPrefill,
  LayeredPrefillResult,
  Prefilled,
  SessionOptions,
  WholePrefill,
} from './types.js';

/** Whether a stage or a session may still be used; every use after its end throws here. */
export class Lifetime {
  private over: string | null = null;

  constructor(private readonly what: string) {}

  get ended(): boolean {
    return this.over !== null;
  }

  /** Throws where this stage has moved on (or was closed). */
  check(): void {
    if (this.over !== null)
      throw new Error(`${this.what} was ${this.over}: use the object its last call returned (or open a new session)`);
  }

  /** Checks, then marks the stage used (`why`: what its use made of it). */
  use(why: string): void {
    this.check();
    this.over = why;
  }

  end(why: string): void {
    this.over ??= why;
  }
}

/** The whole-prompt prefill of one backend session: what it computes, and how the session frees. */
export interface WholeParts<S extends DecodeSession> {
  prefill(audioEmbeddings: Float32Array): Promise<{
    token: number;
    logits?: Float32Array;
    observation: PrefillObservation;
    reused?: boolean;
  }>;
  place(plan: PrefillPlan): Promise<S>;
  /** Frees whatever the session holds now; idempotent. */
  close(): void;
}

export interface LayeredParts<S extends DecodeSession> {
  prefill(audioEmbeddings: Float32Array, run: LayerPrefill): Promise<LayeredPrefillResult<S>>;
  close(): void;
}

/**
 * The stages of a whole-prompt session. A failed stage closes the session (its buffers
 * freed); `close` on any stage frees it at any time.
 */
export function wholePrefill<S extends DecodeSession>(parts: WholeParts<S>): WholePrefill<S> {
  const stage = new Lifetime('this prefill stage');
  const close = () => {
    stage.end('closed');
    parts.close();
  };
  return {
    async prefill(audioEmbeddings) {
      stage.use('prefilled');
      const ran = await failClosed(parts, () => parts.prefill(audioEmbeddings));
      const placement = new Lifetime('this prefilled session');
      const prefilled: Prefilled<S> = {
        ...ran,
        place: async (plan) => {
          placement.use('placed');
          return failClosed(parts, () => parts.place(plan));
        },
        close: () => {
          placement.end('closed');
          parts.close();
        },
      };
      return prefilled;
    },
    close,
  };
}

/** The stage of a session whose prefill places one layer at a time. */
export function layeredPrefill<S extends DecodeSession>(parts: LayeredParts<S>): LayeredPrefill<S> {
  const stage = new Lifetime('this prefill stage');
  return {
    async prefill(audioEmbeddings, run) {
      stage.use('prefilled');
      return failClosed(parts, () => parts.prefill(audioEmbeddings, run));
    },
    close() {
      stage.end('closed');
      parts.close();
    },
  };
}

async function failClosed<T>(parts: { close(): void }, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (e) {
    parts.close();
    throw e;
  }
}

/** A session's options as a backend runs them: the device's request compiled from the readouts. */
export interface SessionShape extends Omit<SessionOptions, 'request' | 'readouts'> {
  request: BackendRequest;
  /** The prefill runs and places one layer at a time (`openByLayer`). */
  layered: boolean;
}

/** The shape of a session and its compiled readouts, from the options it was opened with. */
export function shapeSession(
  c: ModelConfig,
  opts: SessionOptions,
  layered: boolean,
): { shape: SessionShape; readouts: CompiledReadouts } {
  const { readouts: asked, request, ...rest } = opts;
  const readouts = new CompiledReadouts(request, asked ?? {}, opts.audioLength, segmentLength(c));
  return { shape: { ...rest, request: readouts.request, layered }, readouts };
}
