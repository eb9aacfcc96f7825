/**
 * Where a clip comes from: a dropped or chosen file, the microphone, or a shipped sample.
 * Each ends in the same `Clip`, so the rest of the page does not care which.
 */
import type { SampleEntry } from './samples-plugin.js';
import { formatSeconds } from './readouts.js';

export interface Clip {
  name: string;
  blob: Blob;
  /** Reference transcript, for shipped samples: the page then shows the WER. */
  reference: string | null;
}

export interface InputCallbacks {
  onClip(clip: Clip): void;
  onError(title: string, body: string): void;
}

export function wireFileInput(drop: HTMLElement, input: HTMLInputElement, cb: InputCallbacks): void {
  input.addEventListener('change', () => {
    const f = input.files?.[0];
    if (f) cb.onClip({ name: f.name, blob: f, reference: null });
    // Choosing the same file again must fire `change` again.
    input.value = '';
  });
  drop.addEventListener('dragover', (e) => {
    e.preventDefault();
    drop.classList.add('over');
  });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    const f = e.dataTransfer?.files?.[0];
    if (f) cb.onClip({ name: f.name, blob: f, reference: null });
  });
}

/** What the page says when getUserMedia fails. */
export function microphoneRefused(e: unknown): { title: string; body: string } {
  return {
    title: 'The microphone is not available',
    body: `The browser refused access (${e instanceof Error ? e.message : String(e)}). Allow the microphone for this page and try again.`,
  };
}

/** Microphone recording with MediaRecorder; the result is decoded like any file (webm/opus or mp4/aac). */
export function wireRecorder(button: HTMLButtonElement, timer: HTMLElement, cb: InputCallbacks): void {
  let recorder: MediaRecorder | null = null;
  let ticker = 0;
  if (typeof MediaRecorder === 'undefined' || !navigator.mediaDevices?.getUserMedia) {
    button.disabled = true;
    button.title = 'This browser cannot record audio (or the page is not served over https).';
    return;
  }
  button.addEventListener('click', async () => {
    if (recorder) {
      recorder.stop();
      return;
    }
    let stream: MediaStream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({
        audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false },
      });
    } catch (e) {
      const m = microphoneRefused(e);
      cb.onError(m.title, m.body);
      return;
    }
    const chunks: Blob[] = [];
    const started = performance.now();
    recorder = new MediaRecorder(stream);
    recorder.addEventListener('dataavailable', (e) => e.data.size && chunks.push(e.data));
    recorder.addEventListener('stop', () => {
      stream.getTracks().forEach((t) => t.stop());
      clearInterval(ticker);
      const blob = new Blob(chunks, { type: recorder?.mimeType || 'audio/webm' });
      recorder = null;
      button.textContent = '● Record from microphone';
      button.setAttribute('aria-pressed', 'false');
      timer.textContent = '';
      cb.onClip({ name: `Recording ${new Date().toLocaleTimeString()}`, blob, reference: null });
    });
    // A timeslice keeps memory in small chunks over an hour-long recording.
    recorder.start(1000);
    button.textContent = '■ Stop recording';
    button.setAttribute('aria-pressed', 'true');
    ticker = window.setInterval(
      () => (timer.textContent = `recording ${formatSeconds((performance.now() - started) / 1000)}`),
      500,
    );
  });
}

/** Fills the sample list from /samples.json; a missing list leaves a disabled entry, not an error. */
/** Site-root URLs (samples.json and what it lists) resolve against Vite's base, so the demo works under a sub-path too. */
export const siteUrl = (path: string) => new URL(`${import.meta.env.BASE_URL}${path}`, location.href);

export async function wireSamples(
  select: HTMLSelectElement,
  use: HTMLButtonElement,
  cb: InputCallbacks,
): Promise<SampleEntry[]> {
  let samples: SampleEntry[] = [];
  try {
    const res = await fetch(siteUrl('samples.json'));
    if (res.ok) samples = (await res.json()) as SampleEntry[];
  } catch {
    // No list: the page still works with files and the microphone.
  }
  select.replaceChildren();
  if (!samples.length) {
    select.append(new Option('No sample clips on this server', ''));
    select.disabled = true;
    use.disabled = true;
    return samples;
  }
  for (const s of samples) {
    const label = `${s.group === 'samples' ? '' : `${s.group} / `}${s.name}${s.seconds ? ` (${formatSeconds(s.seconds)})` : ''}`;
    select.append(new Option(label, s.url));
  }
  use.addEventListener('click', async () => {
    const s = samples.find((x) => x.url === select.value);
    if (!s) return;
    use.disabled = true;
    try {
      const res = await fetch(siteUrl(s.url));
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const blob = await res.blob();
      const reference = s.reference ? await fetch(siteUrl(s.reference)).then((r) => (r.ok ? r.text() : null)) : null;
      cb.onClip({ name: `${s.group}/${s.name}`, blob, reference: reference?.trim() || null });
    } catch (e) {
      cb.onError('The sample could not be fetched', `${s.url}: ${e instanceof Error ? e.message : String(e)}`);
    } finally {
      use.disabled = false;
    }
  });
  return samples;
}
