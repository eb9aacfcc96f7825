/**
 * ArkVale (Chen et al., NeurIPS 2024): 32-token pages summarised by a per-channel bounding
 * box of their keys, page score Σ_i max(q_i · hi_i, q_i · lo_i) per decode step and head;
 * 2 sink pages + 2 recent pages + top pages by score under the budget; every page mirrored
 * on the CPU and recalled when chosen. Sinks and recent pages are the first and last audio
 * pages (the real sequence sink, bos, and the generated tokens are text and always stay).
 * See pages.ts for the one-step lag and the prefill selection.
 */
import type { PolicyOptions } from './types.js';
import { numOpt } from './select.js';
import { PagedRecallPolicy } from './pages.js';

export class ArkValePolicy extends PagedRecallPolicy {
  /** The options this policy reads (anything else is a typo: BAD_ARGUMENT). */
  static readonly options: readonly string[] = ['pageSize', 'sinkPages', 'recentPages'];
  constructor(opts: PolicyOptions) {
    super(opts, {
      name: 'arkvale',
      pageSize: numOpt(opts, 'pageSize', 32, 1),
      sinkPages: numOpt(opts, 'sinkPages', 2, 0),
      recentPages: numOpt(opts, 'recentPages', 2, 0),
    });
  }
}
