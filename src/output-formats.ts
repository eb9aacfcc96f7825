/**
 * A transcription as the command line and the archives write it: the text, --json's object
 * (whose names other tools read), or SRT / WebVTT subtitles cut from the dated words.
 */
import { subtitleCues, toSrt, toVtt } from './transcribe/subtitles.js';
import { policyBudget } from './policy/registry.js';
import type { TranscriptionResult } from './types.js';

/** What `wnw transcribe` prints on stdout (and `wnw batch` writes): the text, --json's object, or subtitles. */
export const OUTPUT_FORMATS = ['txt', 'json', 'srt', 'vtt'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** What --json prints. The names are read by other tools: keep them. */
export function jsonOutput(r: TranscriptionResult, budget: number) {
  const s = r.stats;
  return {
    text: r.text,
    // The model's answer where a known wrapper was taken off it.
    ...(r.rawText !== undefined && r.rawText !== r.text ? { rawText: r.rawText } : {}),
    words: r.words,
    stats: {
      policy: s.policy,
      budget: policyBudget(s.policy, budget),
      rGpu: s.kv.rGpu,
      rGpuCpu: s.kv.rGpuCpu,
      mbPerStep: s.traffic.mbPerStep,
      msPerToken: s.timing.msPerToken,
      encodeMs: s.timing.encodeMs,
      ...(s.encoderBytes !== undefined ? { encoderBytes: s.encoderBytes } : {}),
      decodeSteps: s.decodeSteps,
      audioSeconds: s.audioSeconds,
      backend: s.backend,
      realTimeFactor: s.timing.realTimeFactor,
      stoppedBy: s.stoppedBy,
      ...(s.warnings?.length ? { warnings: s.warnings } : {}),
    },
    ...(r.error ? { error: oneLine(r.error) } : {}),
  };
}

/** A reason on one line: messages of nested causes can carry newlines. */
export function oneLine(e: unknown): string {
  const msg = e instanceof Error ? e.message : String(e);
  return msg.replace(/\s*\n\s*/g, ' ').trim() || 'unknown error';
}

/** The result as --format asks; subtitles are cut from the dated words, so a partial run gives the cues it reached. */
export function formatResult(r: TranscriptionResult, args: { format: OutputFormat; budget: number }): string {
  switch (args.format) {
    case 'json':
      return `${JSON.stringify(jsonOutput(r, args.budget))}\n`;
    case 'srt':
      return toSrt(subtitleCues(r.words));
    case 'vtt':
      return toVtt(subtitleCues(r.words));
    case 'txt':
      return `${r.text}\n`;
  }
}
