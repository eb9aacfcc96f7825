/**
 * What `wnw --help` and `wnw <command> --help` say about each command beside its flags
 * (flags.ts): a one-line summary, the arguments it is called with, and what a flag's row
 * has no room for.
 */
import type { Command } from './flags.js';

export interface CommandSpec {
  /** One line, for `wnw --help`'s list. */
  summary: string;
  /**
   * The positional arguments and required flags, one form a line (`batch` has two). The
   * first form's usage line lists the other flags; a flag named here is not listed again.
   */
  forms: readonly string[];
  /** The rest, a paragraph a line. */
  about: readonly string[];
}

export const COMMAND_SPECS: Record<Command, CommandSpec> = {
  transcribe: {
    summary: 'transcribe (or translate) an audio file: text, JSON or subtitles on stdout',
    forms: ['FILE'],
    about: [
      'Transcribes an audio file: WAV (PCM or float; any rate; any channels), MP3, FLAC, Ogg Vorbis, Ogg Opus, ' +
        'or M4A/AAC (this one through an ffmpeg on the PATH), told apart by their first bytes. --model takes our own model folder or a ' +
        'Hugging Face folder of Voxtral, Qwen2-Audio or Qwen2.5-Omni; the policies wnw and audiokv need its heads.json (npm run calibrate -- --model DIR).',
      'A Hugging Face folder with an ONNX audio encoder (onnx/audio_encoder*.onnx) runs it by default; ' +
        "--audio-encoder audio-tower runs the checkpoint's audio tower instead, --audio-encoder onnx makes a missing graph an error. " +
        "--weights defaults to q4 for a Hugging Face folder (in f32 Voxtral-Mini-3B's decoder alone is " +
        '14.95 GiB, against 2.10 GiB in q4), to the format a folder converted by wnw convert was packed in, and to f32 for our own model folder. ' +
        "--audio-weights (a Hugging Face audio tower's Linears) defaults to f16 beside a q4 decoder, else to the decoder's format.",
      '--language takes a 2- or 3-letter code, or none to let the model detect it; --task translate --target-language de asks a Hugging Face model whose ' +
        'prompt recipe has a translation for the speech in that language.',
      '--format txt prints the text (the default), json the text, dated words and stats (--json is the same), ' +
        'srt or vtt subtitles cut from the dated words (2 lines of 42 characters at most, 1 to 7 s each).',
    ],
  },
  ask: {
    summary: 'ask questions about one recording, in one conversation',
    forms: ['FILE "question" ["follow-up" ...]'],
    about: [
      'Asks questions about one recording of a Hugging Face model that chats (Voxtral, Qwen2-Audio, Qwen2.5-Omni): ' +
        'the audio is encoded and prefilled once, and each question after the first continues the conversation.',
    ],
  },
  live: {
    summary: 'transcribe audio as it comes (PCM on stdin, or a file fed as if spoken)',
    forms: [''],
    about: [
      'Transcribes audio as it comes: 16 kHz mono s16le PCM from stdin, or --simulate FILE fed as if spoken ' +
        '(each tick waited for, or at --speed N times real time). Each --tick seconds of new audio the model decodes a ' +
        'hypothesis; the words two consecutive hypotheses agree on are printed.',
      'A hypothesis attends a window, not the recording: at most --window seconds of audio and the text committed ' +
        "since the window's start. Once the window would grow past --window it moves to the start of a committed word, " +
        "so a tick encodes and prefills the window's audio only and its cost does not grow with the recording " +
        '(when ticks fall behind the audio, one tick takes all the audio heard since the last).',
    ],
  },
  batch: {
    summary: 'transcribe an archive here, or enqueue it on Redis for wnw worker',
    forms: ['IN... --out DIR', '--queue redis://HOST:PORT/NAME --status'],
    about: [
      'Transcribes an archive: files, folders or manifests (.txt one path a line, .jsonl with per-file options), one output ' +
        'per recording in DIR, written atomically and skipped when done with the same options, so a rerun resumes.',
      'With --queue the recordings are enqueued on Redis (BullMQ) for workers on any number of machines; ' +
        'wnw batch --queue URL --status reports on them (docs/archives.md).',
    ],
  },
  worker: {
    summary: "run an archive queue's jobs on this machine",
    forms: ['--queue redis://HOST:PORT/NAME'],
    about: [
      'Takes jobs enqueued by wnw batch --queue and writes their outputs; the recordings and the output folder must be at ' +
        'the same paths on every worker (a shared folder). SIGTERM or Ctrl-C lets the running jobs finish; a second one stops at once (docs/archives.md).',
    ],
  },
  convert: {
    summary: "pack a Hugging Face folder's decoder weights once",
    forms: ['HF_DIR OUT_DIR'],
    about: ["Packs a Hugging Face folder's decoder weights once, so OUT_DIR loads without conversion."],
  },
  calibrate: {
    summary: "write heads.json (WnW's head roles) from the runtime alone",
    forms: ['--model DIR'],
    about: [
      'Writes heads.json (WnW head roles) computed by the runtime alone: Voice Score from teacher-forced attention, ' +
        'Head Sensitivity estimated from forward passes (docs/calibrate-real-model.md). Resumes from OUT.partial.json after a stop.',
    ],
  },
};
