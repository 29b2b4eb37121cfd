"""The 20-run sweep of tests/python/test_tscope.py from Python, in tscope (libtscope.so, the model
loaded once) and in eager PyTorch (torch_gpt.py in float32, forward hooks) on the same weights, in
the same run: `make bench` runs it with Debian's python3-torch.

    PYTHONPATH=python /usr/bin/python3 tests/ref/python/bench_sweep.py

Runs: the clean and the corrupted text unedited, each of the 8 heads knocked out, each head's
output patched from the clean run into the corrupted one, each FFN knocked out. Best of 5.
"""
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "python"))
import tscope  # noqa: E402
from torch_gpt import GPT, MODEL, read_model, texts  # noqa: E402


def tscope_sweep(m, clean, corrupt):
    _, cache = m.run_with_cache(clean, names="*.self_attn.values")
    m(corrupt)
    zero = lambda x, step: x.fill(0)
    for layer in range(2):
        for head in range(4):
            m.run_with_hooks(clean, hooks=[(f"decoder.layers.{layer}.self_attn.head{head}", zero)])
    for layer in range(2):
        src = cache[f"decoder.layers.{layer}.self_attn.values"]
        for head in range(4):
            m.run_with_hooks(corrupt, hooks=[(f"decoder.layers.{layer}.self_attn.head{head}",
                                              lambda x, s, src=src, head=head: src[:, head])])
    for layer in range(2):
        m.run_with_hooks(clean, hooks=[(f"decoder.layers.{layer}.ffn.out", zero)])


def torch_sweep(model, clean, corrupt):
    kept = {}
    hs = [model.values[i].register_forward_hook(lambda m_, i_, o, i=i: kept.__setitem__(i, o.clone()))
          for i in range(2)]
    model(clean)
    for h in hs:
        h.remove()
    model(corrupt)

    def run(ids, mod, fn):
        h = mod.register_forward_hook(fn)
        model(ids)
        h.remove()

    for layer in range(2):
        for head in range(4):
            def zero(m_, i_, o, head=head):
                o = o.clone()
                o[:, head] = 0
                return o
            run(clean, model.values[layer], zero)
    for layer in range(2):
        for head in range(4):
            def patch(m_, i_, o, head=head, src=kept[layer]):
                o = o.clone()
                o[:, head] = src[:, head]
                return o
            run(corrupt, model.values[layer], patch)
    for layer in range(2):
        run(clean, model.ffn_out[layer], lambda m_, i_, o: torch.zeros_like(o))


def best(fn, reps=5):
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    clean_text, corrupt_text = texts()
    m = tscope.load(MODEL)
    clean, corrupt = m.tokenize(clean_text), m.tokenize(corrupt_text)
    t_ts = best(lambda: tscope_sweep(m, clean, corrupt))
    w, config, tokens = read_model(np.float32)
    model = GPT(w, config).eval()
    c = torch.from_numpy(clean.astype(np.int64))[None]
    k = torch.from_numpy(corrupt.astype(np.int64))[None]
    with torch.no_grad():
        t_pt = best(lambda: torch_sweep(model, c, k))
    print(f"20-run sweep on {os.path.basename(MODEL)} (64 tokens), best of 5, {torch.get_num_threads()} threads "
          f"for PyTorch: tscope from Python {t_ts * 1000:.1f} ms, eager PyTorch (float32) {t_pt * 1000:.1f} ms")


if __name__ == "__main__":
    main()
