"""The peer of `tscope bench forward --preset gpt2`: GPT-2 small's forward in PyTorch.

    /usr/bin/python3 tests/ref/gpt/torch_gpt2_bench.py [--threads 2] [--runs 3]

The model is make_fixtures.py's, written from the published GPT-2 architecture (Conv1D
weights, GELU's tanh form, a causal softmax, a tied head), at GPT-2 small's sizes: 12 layers,
width 768, 12 heads, FFN 3072, a context of 1024, 50257 tokens. Random weights, one sequence of
1024 random ids, no gradients; it prints the median of --runs timed forwards after one warm-up.
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    gpt.L, gpt.D, gpt.H, gpt.F, gpt.P, gpt.V = 12, 768, 12, 3072, 1024, 50257  # GPT-2 small
    w = gpt.make_weights(torch.Generator().manual_seed(0))
    ids = torch.randint(0, gpt.V, (1, gpt.P), generator=torch.Generator().manual_seed(1))
    nothing = lambda *args: None  # noqa: E731
    times = []
    with torch.no_grad():
        gpt.forward(w, ids, nothing)
        for _ in range(a.runs):
            t0 = time.perf_counter()
            gpt.forward(w, ids, nothing)
            times.append(time.perf_counter() - t0)
    print(f"torch {torch.__version__}, {a.threads} threads: GPT-2 small forward, 1 x 1024 tokens: "
          f"{statistics.median(times):.3f} s (median of {a.runs})")


if __name__ == "__main__":
    main()
