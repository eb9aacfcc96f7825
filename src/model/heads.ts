/** The heads file (heads.json): calibrated head scores and the roles assigned per budget. */
/** Which calibration score ranks the heads: VS × HS (the method), or one factor (the ablation). */
export type HeadRanking = 'product' | 'voice' | 'sensitivity';

/** heads.json written by `npm run calibrate` next to the model. */
export interface HeadsFile {
  model: string;
  numLayers: number;
  numKvHeads: number;
  /** Per KV head (flat index): Voice Score and Head Sensitivity. */
  voiceScore: number[];
  headSensitivity: number[];
  /** What `score` is; default 'product'. */
  ranking?: HeadRanking;
  /** Per KV head: the ranking score (VS × HS for 'product'); derived from the two above when absent. */
  score?: number[];
  /** Role assignments per target budget, keyed by `budgetKey(budget)` ("0.2"). */
  roles: Record<string, HeadRoles>;
}

export interface HeadRoles {
  anchors: number[];
  tidal: number[];
  fixed: number[];
  /** Per KV head retention in [0, 1] (anchors 1). */
  retention: number[];
  /** The lambda found by the search, and the r_GPU it measured on the calibration clips. */
  lambda: number;
  measuredRGpu: number;
  /** Prefill selection the search assumed; default 'segment'. */
  selection?: 'segment' | 'global';
  /** The retention floor in force (triage.ts `segmentFloor`); 0 or absent: none. */
  floor?: number;
}
