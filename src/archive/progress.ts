/**
 * The progress of an archive run as one line: files, hours of audio, the rate and an ETA from
 * the files transcribed so far (skipped ones cost nothing and are left out of the rate).
 */
export interface ArchiveProgress {
  total: number;
  transcribed: number;
  skipped: number;
  failed: number;
  audioSeconds: number;
  /** Wall seconds spent transcribing (not skipping). */
  seconds: number;
}

export function clock(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const hms = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60];
  return hms.map((n, i) => (i ? String(n).padStart(2, '0') : String(n))).join(':');
}

/** "files 5/8 (2 already done, 1 failed), audio 0.02 h at 41.3 h/h, ETA 0:00:03" */
export function archiveProgressLine(p: ArchiveProgress): string {
  const finished = p.transcribed + p.skipped + p.failed;
  const left = p.total - finished;
  const notes = [p.skipped ? `${p.skipped} already done` : '', p.failed ? `${p.failed} failed` : ''].filter(Boolean);
  const rate = p.seconds > 0 ? ` at ${(p.audioSeconds / p.seconds).toFixed(1)} h/h` : '';
  // From the transcribed files alone: a failure is usually quick and says little about the rest.
  const eta = left > 0 && p.transcribed > 0 ? `, ETA ${clock((p.seconds / p.transcribed) * left)}` : '';
  return (
    `files ${finished}/${p.total}${notes.length ? ` (${notes.join(', ')})` : ''}, ` +
    `audio ${(p.audioSeconds / 3600).toFixed(2)} h${rate}${eta}`
  );
}
