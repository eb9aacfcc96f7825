/**
 * Praat TextGrid, the long ("ooTextFile") text format: each interval is written as
 * `intervals [k]:` then `xmin = ...`, `xmax = ...`, `text = "..."` (a quote inside the
 * text is doubled). Format described at https://www.fon.hum.uva.nl/praat/manual/TextGrid_file_formats.html.
 */
export interface Interval {
  xmin: number;
  xmax: number;
  text: string;
}

const INTERVAL =
  /intervals\s*\[\d+\]\s*:\s*xmin\s*=\s*([-+\d.eE]+)\s*xmax\s*=\s*([-+\d.eE]+)\s*text\s*=\s*"((?:[^"]|"")*)"/g;

/** Every interval of every interval tier, in file order. */
export function parseTextGrid(source: string): Interval[] {
  const out: Interval[] = [];
  for (const m of source.matchAll(INTERVAL))
    out.push({ xmin: Number(m[1]), xmax: Number(m[2]), text: m[3].replaceAll('""', '"') });
  return out;
}
