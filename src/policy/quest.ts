/**
 * Quest (Tang et al., ICML 2024): 16-token pages with per-channel min/max key bounds,
 * query-aware page selection every step. Quest itself keeps the whole cache in GPU memory
 * and only reads the chosen pages; measured by residency that would be r_GPU = 1, so here
 * unchosen pages leave the GPU and come back from a full CPU mirror (as ArkVale does),
 * which makes it comparable under the same budget. No forced pages: Quest's always-read
 * current page is generated text, which always stays. See pages.ts for the one-step lag.
 */
import type { PolicyOptions } from './types.js';
import { numOpt } from './select.js';
import { PagedRecallPolicy } from './pages.js';

export class QuestPolicy extends PagedRecallPolicy {
  /** The options this policy reads (anything else is a typo: BAD_ARGUMENT). */
  static readonly options: readonly string[] = ['pageSize', 'sinkPages', 'recentPages'];
  constructor(opts: PolicyOptions) {
    super(opts, {
      name: 'quest',
      pageSize: numOpt(opts, 'pageSize', 16, 1),
      sinkPages: numOpt(opts, 'sinkPages', 0, 0),
      recentPages: numOpt(opts, 'recentPages', 0, 0),
    });
  }
}
