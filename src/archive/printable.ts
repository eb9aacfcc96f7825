/**
 * Text from the queue (a job's name, its file, a failure's reason) as a worker's log and
 * `--status` print it: whoever wrote the job wrote that text, so a newline or a terminal's escape
 * sequence in it is shown escaped, never acted on or taken for a line of its own.
 */
export function printable(text: unknown): string {
  const s = typeof text === 'string' ? text : (JSON.stringify(text) ?? String(text));
  return s.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
