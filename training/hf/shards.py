"""The safetensors shards of a Hugging Face folder, read without the safetensors package:
the shards `model.safetensors.index.json` names (else `model.safetensors`), tensor by
tensor through a memory map, BF16 and F16 widened to float32."""
import json
import os

import numpy as np


def shard_paths(folder):
    index = os.path.join(folder, 'model.safetensors.index.json')
    if os.path.exists(index):
        return [os.path.join(folder, s) for s in sorted(set(json.load(open(index))['weight_map'].values()))]
    return [os.path.join(folder, 'model.safetensors')]


def tensors(folder, keep=(), strict=False):
    """Yields (upstream name, float32 array) for the tensors whose names start with one of
    `keep` (every tensor when empty). Other dtypes are skipped, or an error when `strict`."""
    keep = tuple(keep)
    for path in shard_paths(folder):
        with open(path, 'rb') as f:
            n = int.from_bytes(f.read(8), 'little')
            header = json.loads(f.read(n))
        raw = np.memmap(path, dtype=np.uint8, mode='r')
        for name, t in header.items():
            if name == '__metadata__' or (keep and not name.startswith(keep)):
                continue
            b, e = t['data_offsets']
            buf = raw[8 + n + b:8 + n + e]
            if t['dtype'] == 'BF16':
                a = (buf.view('<u2').astype(np.uint32) << 16).view(np.float32)
            elif t['dtype'] == 'F16':
                a = buf.view('<f2').astype(np.float32)
            elif t['dtype'] == 'F32':
                a = np.array(buf.view('<f4'))
            elif strict:
                raise ValueError(f'{path}: tensor {name} has dtype {t["dtype"]}; expected BF16, F16 or F32')
            else:
                continue
            yield name, a.reshape(t['shape'])
        del raw
