"""The peer of `tscope bench live`: one PyTorch forward of each live target, same sizes, same length.

    /usr/bin/python3 tests/ref/gpt/torch_live_bench.py [--threads 2] [--runs 9]

The model is make_fixtures.py's GPT (written from the published GPT-2 architecture), with random
weights, no gradients. Two targets, as `tscope bench live` types them:
  - the Bible model's sizes (assets/kjv-char.safetensors: 4 layers, width 128, 4 heads, FFN 512,
    73 characters, a context of 128) at its full context, 1 x 128 tokens;
  - GPT-2 small's sizes (12 layers, width 768, 12 heads, FFN 3072, 50257 tokens) at 1 x 64 tokens.
One line each, `peer NAME: MS ms`, the median of --runs forwards after one warm-up.
Install libopenblas0-pthread first: with the reference BLAS PyTorch is ~40x slower.
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as gpt  # noqa: E402

TARGETS = [
    ("kjv-char", (4, 128, 4, 512, 128, 73), 128),
    ("gpt2", (12, 768, 12, 3072, 1024, 50257), 64),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=9)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    nothing = lambda *args: None  # noqa: E731
    for name, sizes, length in TARGETS:
        gpt.L, gpt.D, gpt.H, gpt.F, gpt.P, gpt.V = sizes
        w = gpt.make_weights(torch.Generator().manual_seed(0))
        ids = torch.randint(0, gpt.V, (1, length), generator=torch.Generator().manual_seed(1))
        times = []
        with torch.no_grad():
            gpt.forward(w, ids, nothing)
            for _ in range(a.runs):
                t0 = time.perf_counter()
                gpt.forward(w, ids, nothing)
                times.append(time.perf_counter() - t0)
        print(f"peer {name}: {1e3 * statistics.median(times):.2f} ms "
              f"(torch {torch.__version__}, {a.threads} threads, 1 x {length} tokens)", flush=True)


if __name__ == "__main__":
    main()
