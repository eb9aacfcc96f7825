"""CPU cost of one decoder training step on long clips, for the allocator setting of
train_common.keep_heap: forward + backward of the 4-layer, width-192 decoder (guided heads
on, as in the label and reading stages) on random input of [2, 650, 192], 1 thread.

  /usr/bin/python3 training/bench_step.py                                   # glibc defaults
  GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967295:glibc.malloc.trim_threshold=4294967295 \\
      /usr/bin/python3 training/bench_step.py                               # what keep_heap sets
"""
import json
import os
import resource
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from model import Decoder  # noqa: E402

torch.set_num_threads(1)
cfg = json.load(open(os.path.join(os.path.dirname(HERE), "public/models/wnw-ref/config.json")))
dec = Decoder(cfg)
for layer in (1, 2):
    dec.layers[layer].guide_heads = [0, 4, 8, 12]
x = torch.randn(2, 650, cfg["hidden_size"])


def step():
    loss = dec(x).pow(2).mean()
    for layer in dec.layers:
        if layer.guided_att is not None:
            loss = loss + layer.guided_att.mean()
            layer.guided_att = None
    loss.backward()


step()
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.time()
for _ in range(3):
    step()
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(f"per step: wall {(time.time() - t0) / 3:.2f} s, user {(r1.ru_utime - r0.ru_utime) / 3:.2f} s, "
      f"system {(r1.ru_stime - r0.ru_stime) / 3:.2f} s, page faults {(r1.ru_minflt - r0.ru_minflt) / 3:.0f}")
