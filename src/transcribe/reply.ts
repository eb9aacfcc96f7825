/**
 * A chat model's known answer wrappers (HfFamily.replyWrappers) taken off the transcript as
 * it streams: the text that may still become a wrapper's opening is held back until it
 * either is one (then dropped) or cannot be one (then released), and the tail that may be
 * the wrapper's closing is held back until more text follows it or the answer ends. The
 * pieces released, joined, are the final text; the raw text is kept beside it.
 *
 * Matching ignores case, and a space in a pattern matches any run of whitespace, or none
 * ("is: '" matches "is:'" too).
 */
import type { ReplyWrapper } from '../model/families/types.js';

const isSpace = (c: string) => /\s/.test(c);

/**
 * How much of `text` the `pattern` takes from its start (leading whitespace of `text`
 * included), 'partial' where `text` ends before the pattern could be told apart, or null
 * where it does not match.
 */
export function matchStart(pattern: string, text: string): number | 'partial' | null {
  let j = 0;
  while (j < text.length && isSpace(text[j])) j++;
  for (let i = 0; i < pattern.length;) {
    if (isSpace(pattern[i])) {
      while (i < pattern.length && isSpace(pattern[i])) i++;
      while (j < text.length && isSpace(text[j])) j++;
      continue;
    }
    if (j >= text.length) return 'partial';
    if (pattern[i].toLowerCase() !== text[j].toLowerCase()) return null;
    i++;
    j++;
  }
  return j;
}

/** Whether `rest` is, up to trailing whitespace, all of `after` or the start of it. */
function mayClose(after: string, rest: string): boolean {
  const body = rest.trimEnd();
  if (!body) return true;
  const m = matchStart(after, body);
  return m === 'partial' || m === body.length;
}

export class ReplyUnwrapper {
  private state: 'opening' | 'inside' | 'plain';
  /** Text received but not yet released. */
  private held = '';
  /** The closings of the wrappers whose opening matched. */
  private closings: string[] = [];

  constructor(private readonly wrappers: readonly ReplyWrapper[]) {
    this.state = wrappers.length ? 'opening' : 'plain';
  }

  /** The text `piece` releases (possibly '' while it is held back). */
  push(piece: string): string {
    if (this.state === 'plain') return piece;
    this.held += piece;
    if (this.state === 'opening') {
      this.open(false);
      if (this.state === 'opening') return '';
    }
    return this.state === 'inside' ? this.releaseInside() : this.releaseAll();
  }

  /** What is still held back, at the end of the answer: a complete closing is dropped. */
  flush(): string {
    if (this.state === 'opening') this.open(true);
    if (this.state === 'inside') {
      const body = this.held.trimEnd();
      const closed = this.closings.some((c) => c && matchStart(c, body) === body.length);
      if (closed) this.held = '';
    }
    return this.releaseAll();
  }

  /** Decides on the opening once no wrapper may still match (or the answer ended). */
  private open(final: boolean): void {
    const matches = this.wrappers.map((w) => ({ w, m: matchStart(w.before, this.held) }));
    if (!final && matches.some((x) => x.m === 'partial')) return;
    const full = matches.filter((x): x is { w: ReplyWrapper; m: number } => typeof x.m === 'number');
    if (!full.length) {
      this.state = 'plain';
      return;
    }
    const longest = Math.max(...full.map((x) => x.m));
    this.closings = full.filter((x) => x.m === longest).map((x) => x.w.after);
    this.held = this.held.slice(longest);
    this.state = 'inside';
  }

  /** Releases all but the tail that may still be a closing. */
  private releaseInside(): string {
    let p = 0;
    while (p < this.held.length && !this.closings.some((c) => mayClose(c, this.held.slice(p)))) p++;
    const out = this.held.slice(0, p);
    this.held = this.held.slice(p);
    return out;
  }

  private releaseAll(): string {
    const out = this.held;
    this.held = '';
    return out;
  }
}

/** The text of a whole answer without its wrapper (what the streamed pieces join to). */
export function unwrapReply(wrappers: readonly ReplyWrapper[], raw: string): string {
  const u = new ReplyUnwrapper(wrappers);
  return u.push(raw) + u.flush();
}
