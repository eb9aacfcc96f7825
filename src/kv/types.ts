/** Residency accounting a policy, a report and the UI can read. */
export interface ResidencyStats {
  /** Audio positions on the GPU, per KV head. */
  gpuPerHead: Int32Array;
  /** Audio positions on GPU or with a CPU copy, per KV head. */
  gpuOrCpuPerHead: Int32Array;
  /** r_GPU = sum(gpuPerHead) / (heads * audioLength). */
  rGpu: number;
  rGpuCpu: number;
  /** Bytes of KV pages in use on the GPU (audio and text), and the pool's capacity. */
  gpuBytesInUse: number;
  gpuBytesCapacity: number;
  /** Text pages in use, all heads (taken as tokens are generated). */
  textPages: number;
  /** Bytes held in CPU offload memory. */
  cpuBytes: number;
}

/** Data moved by one plan. */
export interface TransferStats {
  bytesToGpu: number;
  bytesToCpu: number;
  recalledPositions: number;
  releasedPositions: number;
}
