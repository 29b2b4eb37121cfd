"""The Python package against tscope's own command line and against PyTorch's fixtures
(tests/ref/python, made by make_fixtures.py: no torch needed here). Run by tests/python_test.sh:

    TSCOPE=./tscope PYTHONPATH=python python3 tests/python/test_tscope.py

Ends with "N passed, N failed" like every test of tscope.
"""
import os
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

import tscope

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REF = os.path.join(ROOT, "tests", "ref", "python")
MODEL = os.path.join(ROOT, "assets", "induction-2l.safetensors")
TSCOPE = os.environ.get("TSCOPE", os.path.join(ROOT, "tscope"))
TOL = 1e-4
TMP = tempfile.mkdtemp(prefix="tscope-py-")
passed = failed = 0


def test(fn):
    global passed, failed
    try:
        fn()
        passed += 1
    except Exception:  # noqa: BLE001
        failed += 1
        print(f"FAIL: {fn.__name__}")
        traceback.print_exc(limit=4)
    return fn


def ref(name):
    return np.load(os.path.join(REF, name + ".npy"))


def close(name, got, want, tol=TOL):
    d = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max())
    print(f"  {name}: largest difference {d:.2e} (tolerance {tol:g})")
    assert d <= tol, f"{name}: {d} > {tol}"


m = tscope.load(MODEL)
ids, other = ref("ids"), ref("other_ids")
POS = int(open(os.path.join(REF, "pos.txt")).read())
CLEAN_TRACE = os.path.join(TMP, "clean.tstrace")
REF_TRACE = os.path.join(TMP, "ref.tstrace")


def sweep(model, clean_ids, corrupt_ids):
    """20 runs: unedited clean and corrupt, each of the 8 heads knocked out, each of the 8 heads'
    outputs patched from the clean run into the corrupt one, and each FFN knocked out."""
    _, clean = model.run_with_cache(clean_ids, names="*.self_attn.values")
    model(corrupt_ids)
    out = []
    for layer in range(2):
        for head in range(4):
            zero = lambda x, step: x.fill(0)
            out.append(model.run_with_hooks(clean_ids, hooks=[(f"decoder.layers.{layer}.self_attn.head{head}", zero)]))
    for layer in range(2):
        src = clean[f"decoder.layers.{layer}.self_attn.values"]
        for head in range(4):
            def patch(x, step, src=src, head=head):
                x[:, head] = src[:, head]
            out.append(model.run_with_hooks(corrupt_ids, hooks=[(f"decoder.layers.{layer}.self_attn.values", patch)]))
    for layer in range(2):
        out.append(model.run_with_hooks(clean_ids, hooks=[(f"decoder.layers.{layer}.ffn.out", lambda x, s: x.fill(0))]))
    return out



@test
def plain_logits_match_pytorch():
    close("plain", m(ids), ref("plain_logits"))
    close("other plain", m(other), ref("other_plain_logits"))


@test
def run_with_cache_equals_run_trace():
    text = m.decode(ids)
    path = os.path.join(TMP, "cli.tstrace")
    subprocess.run([TSCOPE, "run", "--load", MODEL, "--text", text, "--trace", path, "--level", "values"],
                   check=True, stdout=subprocess.DEVNULL)
    t = tscope.Trace(path)
    logits, cache = m.run_with_cache(ids)
    common = [n for n in cache if n in t and t.steps[t._index[n]][4]]
    assert len(common) > 60, f"only {len(common)} steps in common"
    differ = [n for n in common if not np.array_equal(cache[n].reshape(t[n].shape), t[n], equal_nan=True)]
    print(f"  {len(common)} steps in common, {len(differ)} differ")
    assert not differ, differ
    assert cache["decoder.layers.1.self_attn.weights"].shape == (1, 4, 64, 64)
    close("logits", logits, t["logits"], 0)


@test
def hooks_see_the_models_own_memory():
    seen = {}

    def look(x, step):
        seen["owndata"] = x.flags.owndata
        seen["writeable"] = x.flags.writeable
        seen["step"] = step

    m.run_with_hooks(ids, hooks=[("decoder.layers.0.ffn.out", look)])
    assert seen["owndata"] is False and seen["writeable"] is True, seen
    assert seen["step"].name == "decoder.layers.0.ffn.out" and seen["step"].op == "linear", seen["step"]


@test
def head_pattern_patch_matches_pytorch():
    _, clean = m.run_with_cache(ids, names="decoder.layers.1.self_attn.weights")
    src = clean["decoder.layers.1.self_attn.weights"]

    def patch(x, step):
        x[:, 1] = src[:, 1]

    close("pattern patch", m.run_with_hooks(other, hooks=[("decoder.layers.1.self_attn.weights", patch)]),
          ref("pattern_patch_logits"))


@test
def single_head_output_patch_matches_pytorch():
    _, clean = m.run_with_cache(ids, names="*.self_attn.values")
    src = clean["decoder.layers.1.self_attn.values"][:, 1]
    # a head by name: the hook gets that head's slice of values (B, S, hd); returning replaces it
    got = m.run_with_hooks(other, hooks=[("decoder.layers.1.self_attn.head1", lambda x, step: src)])
    close("head patch (hook)", got, ref("head_patch_logits"))
    m.run(ids, trace=CLEAN_TRACE)
    got = m.run(other, patch=f"{CLEAN_TRACE}:decoder.layers.1.self_attn.head1")
    close("head patch (--patch spec)", got, ref("head_patch_logits"))
    got = m.run(other, patch=f"{CLEAN_TRACE}:decoder.layers.1.self_attn.head1@{POS}")
    close("head patch at one position", got, ref("head_patch_pos_logits"))


@test
def steering_vector_matches_pytorch():
    v = ref("steer")

    def steer(x, step):
        return x + v  # a new array: copied into the step

    close("steer (hook)", m.run_with_hooks(ids, hooks=[("decoder.layers.0.out", steer)]), ref("steer_logits"))
    path = os.path.join(REF, "steer.npy")
    close("steer (--add spec)", m.run(ids, add=f"decoder.layers.0.out={path}"), ref("steer_logits"))
    close("steer at one position", m.run(ids, add=f"decoder.layers.0.out@{POS}={path}"), ref("steer_pos_logits"))


@test
def mean_ablation_from_reference_trace_matches_pytorch():
    m.run(ref("ref_ids"), trace=REF_TRACE)
    got = m.run(ids, ablate="decoder.layers.1.self_attn.head1=mean", mean_from=REF_TRACE)
    close("mean from a reference trace", got, ref("mean_ref_logits"))
    mu = tscope.Trace(REF_TRACE)["decoder.layers.1.self_attn.values"][:, 1].mean(axis=(0, 1))

    def ablate(x, step):
        x[:] = mu

    close("mean ablation (hook)", m.run_with_hooks(ids, hooks=[("decoder.layers.1.self_attn.head1", ablate)]),
          ref("mean_ref_logits"))


@test
def generate_applies_hooks_at_every_token():
    v = ref("steer")
    hooks = [("decoder.layers.0.out", lambda x, step: x + v)]
    prompt = ids[0, :20]
    got = m.generate(prompt, 12, hooks=hooks, temperature=0)
    seq = list(prompt)
    for _ in range(12):  # greedy, the whole text through the model each time
        seq.append(int(np.argmax(m.run_with_hooks(np.array(seq), hooks=hooks)[0, -1])))
    assert list(got) == seq, (list(got), seq)
    assert list(m.generate(prompt, 12, temperature=0)) != seq, "the steering vector changed nothing"
    text = m.generate(m.decode(prompt), 5, temperature=0.8, top_k=5, seed=3)
    assert isinstance(text, str) and len(text) == 25, text


@test
def generate_agrees_with_the_command_line():
    steer = os.path.join(REF, "steer.npy")
    prompt = m.decode(ids[0, :20])
    cli = subprocess.run([TSCOPE, "generate", "--load", MODEL, "--prompt", prompt, "-n", "24", "--temperature", "0",
                          "--quiet", "--add", f"decoder.layers.0.out={steer}"], check=True, capture_output=True,
                         text=True).stdout.rstrip("\n")
    assert m.generate(prompt, 24, temperature=0, add=f"decoder.layers.0.out={steer}") == cli, cli
    v = ref("steer")
    assert m.generate(prompt, 24, temperature=0, hooks=[("decoder.layers.0.out", lambda x, s: x + v)]) == cli
    cli = subprocess.run([TSCOPE, "generate", "--load", MODEL, "--prompt", prompt, "-n", "30", "--temperature", "0.9",
                          "--top-k", "8", "--seed", "5", "--quiet"], check=True, capture_output=True,
                         text=True).stdout.rstrip("\n")
    assert m.generate(prompt, 30, temperature=0.9, top_k=8, seed=5) == cli, cli


@test
def errors_are_exceptions_with_tscopes_message():
    try:
        tscope.load("no-such-preset")
        raise AssertionError("no error")
    except tscope.TscopeError as e:
        assert "preset" in str(e) and "tiny" in str(e), str(e)
    try:
        m.run(ids, ablate="decoder.layers.9.self_attn.head0")
        raise AssertionError("no error")
    except tscope.TscopeError as e:
        assert "layers 0 to 1" in str(e), str(e)
    try:
        m.run_with_hooks(ids, hooks=[("decoder.layers.0.out", lambda x, s: x[:, :3])])
        raise AssertionError("no error")
    except ValueError as e:
        assert "returned shape" in str(e), str(e)

    class Mine(Exception):
        pass

    def boom(x, step):
        raise Mine("from the hook")

    try:
        m.run_with_hooks(ids, hooks=[("decoder.layers.0.out", boom)])
        raise AssertionError("no error")
    except Mine:
        pass
    close("after a failed pass", m(ids), ref("plain_logits"))  # the model is unharmed


@test
def bert_token_types_match_hugging_face_and_the_command_line():
    bert = os.path.join(ROOT, "tests", "ref", "hf", "bert")
    b = tscope.load(bert)
    bids = np.load(os.path.join(bert, "ids.npy"))
    tt_path = os.path.join(bert, "token_type_ids.npy")
    tt = np.load(tt_path)
    want = np.load(os.path.join(bert, "logits.npy"))
    got = b(bids, token_types=tt)
    close("BERT with its token types", got, want)
    close("run_with_cache with token types", b.run_with_cache(bids, token_types=tt)[0], want)
    close("run_with_hooks with token types", b.run_with_hooks(bids, token_types=tt), want)
    mine = os.path.join(TMP, "bert_logits.npy")
    np.save(mine, got)
    subprocess.run([TSCOPE, "run", "--load", bert, "--ids", os.path.join(bert, "ids.npy"), "--token-types", tt_path,
                    "--expect", mine, "--tol", "1e-4"], check=True, capture_output=True, text=True)
    import warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        b(bids)
        b(bids)
    said = [str(x.message) for x in w]
    assert len(said) == 1 and "token types all 0, none given" in said[0], said
    for bad, words in ((tt[:, :-1], "one type for each id"), (tt + 2, "is not one of the model's 2"),
                       (tt.astype(np.float32), "integer token types")):
        try:
            b(bids, token_types=bad)
            raise AssertionError("no error")
        except tscope.TscopeError as e:
            assert words in str(e) and "\n" not in str(e), str(e)
    for call, words in ((lambda: b.generate(bids[0], 2), "scores the token at each position, not the next one"),
                        (lambda: b.attribute(bids[0]), "score the token at each position, not the next one")):
        try:
            call()
            raise AssertionError("no error")
        except tscope.TscopeError as e:
            assert words in str(e) and "masked language model (BERT)" in str(e), str(e)
    try:
        m(ids, token_types=np.zeros_like(ids))
        raise AssertionError("no error")
    except tscope.TscopeError as e:
        assert "no token type embeddings" in str(e), str(e)


@test
def presets_and_batches():
    g = tscope.load("lm", vocab=50, d_model=32, heads=2, ffn=64, layers=1, seq=16, seed=7)
    assert g.config["d_model"] == 32 and not g.has_tokenizer
    x = np.arange(24).reshape(2, 12) % 50
    batch = g(x)
    assert batch.shape == (2, 12, 50)
    close("batch row 1 alone", g(x[1]), batch[1:2], 1e-5)
    assert "decoder.layers.0.self_attn.weights" in g.step_names()


@test
def trace_is_a_mapping():
    t = tscope.Trace(CLEAN_TRACE)
    assert "decoder.layers.1.self_attn.weights" in t and len(t) > 60
    w = t["decoder.layers.1.self_attn.weights"]
    assert w.shape == (1, 4, 64, 64) and not w.flags.writeable
    assert t.metadata["config"]["d_model"] == 64
    try:
        t["decoder.layers.1.self_attn.weight"]
        raise AssertionError("no error")
    except KeyError as e:
        assert "decoder.layers.1.self_attn.weights" in str(e)


@test
def figures_show_in_a_notebook():
    _, cache = m.run_with_cache(ids, names="*.self_attn.weights")
    f = tscope.figure(cache, "decoder.layers.1.self_attn.weights", head=1, title="layer 1, head 1",
                      highlight=(POS, POS - 31))
    png = f._repr_png_()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000, len(png)
    assert "<svg" in f._repr_svg_()
    out = f.save(os.path.join(TMP, "head1.png"))
    assert os.path.getsize(out) > 5000
    g = tscope.figure(tscope.Trace(CLEAN_TRACE), "decoder.layers.1.self_attn.weights")
    assert g._repr_png_()[:4] == b"\x89PNG"
    try:
        tscope.figure(cache, "decoder.layers.1.self_attn.weights", head=9)._repr_png_()
        raise AssertionError("no error")
    except tscope.TscopeError as e:
        assert "head" in str(e), str(e)


@test
def attribution_matches_pytorch_and_the_command_line():
    a = m.attribute(ids, answer="d", wrong="G")
    assert a.shares.shape == (64, 14) and a.parts[1] == "layer 0 head 0" and a.parts[-1] == "norm beta, head bias"
    close("attribute answer - wrong", a.shares, ref("dla_diff"))
    close("attribute one token", m.attribute(ids, answer="e").shares, ref("dla_token"))
    top = m.attribute(ids)
    close("attribute the top guess", top.shares, ref("dla_top"))
    assert np.array_equal(top.answer, ref("dla_top_ids")) and (top.wrong == -1).all()
    close("the shares add up to the logit difference", a.shares.astype(np.float64).sum(1), a.logit)
    assert np.array_equal(a["layer 1 head 1"], a.shares[:, 8])
    by_id = m.attribute(ids, answer=int(m.tokenize("d")[0]), wrong=[int(m.tokenize("G")[0])] * 64)
    assert np.array_equal(by_id.shares, a.shares)
    # the command line's --npz holds the very float32s: full precision both ways
    npz = os.path.join(TMP, "dla.npz")
    subprocess.run([TSCOPE, "attribute", "--load", MODEL, "--text", m.decode(ids), "--position", "all",
                    "--answer", "d", "--wrong", "G", "--npz", npz], check=True, capture_output=True)
    assert np.array_equal(np.load(npz)["shares"], a.shares)
    for kw, want in ((dict(answer="dd"), "2 tokens"), (dict(wrong="G"), "needs answer"),
                     (dict(answer="d", wrong="d"), "both"), (dict(answer=[1, 2]), "each of the 64")):
        try:
            m.attribute(ids, **kw)
            raise AssertionError(f"no error for {kw}")
        except tscope.TscopeError as e:
            assert want in str(e), (kw, str(e))


@test
def attribution_adds_up_with_and_without_a_final_norm():
    # without a final norm nothing is centred or scaled: the shares are the parts read along W_U
    for final_norm in (True, False):
        g = tscope.load("lm", vocab=50, d_model=32, heads=2, ffn=64, layers=2, seq=16, seed=7, final_norm=final_norm)
        a = g.attribute(np.arange(12) % 50)
        assert a.shares.shape == (12, 10)
        close(f"shares add up, final_norm={final_norm}", a.shares.astype(np.float64).sum(1), a.logit, 1e-5)


@test
def a_bare_state_dict_loads_with_run_s_flags():
    enc = os.path.join(ROOT, "tests", "ref", "load_encoder")
    path = os.path.join(enc, "weights.safetensors")
    cli = subprocess.run([TSCOPE, "run", "--load", path, "--input", os.path.join(enc, "x.npy")], capture_output=True,
                         text=True)
    want = cli.stderr.strip().split(": ", 1)[1]  # run's sentence, after "tscope run: "
    try:
        tscope.load(path, heads=4)
        raise AssertionError("no error")
    except tscope.TscopeError as e:
        assert "norm placement, activation" in str(e), str(e)
    try:
        tscope.load(path)
        raise AssertionError("no error")
    except tscope.TscopeError as e:
        assert str(e) == want, (str(e), want)
    e = tscope.load(path, heads=4, norm="pre", activation="gelu", mask="none")
    assert e.config["heads"] == 4 and e.config["norm"] == "pre" and not e.has_tokenizer
    close("nn.TransformerEncoder's state_dict from Python", e(np.load(os.path.join(enc, "x.npy"))),
          np.load(os.path.join(enc, "out.npy")))
    tr = os.path.join(ROOT, "tests", "ref", "load_transformer")
    t = tscope.load(os.path.join(tr, "weights.safetensors"), heads=2, norm="post", activation="relu")
    got = t(np.load(os.path.join(tr, "src.npy")), tgt=np.load(os.path.join(tr, "tgt.npy")))
    close("nn.Transformer's state_dict from Python", got, np.load(os.path.join(tr, "out.npy")))
    for kw, part in ((dict(heads=3, norm="pre", activation="gelu"), "does not divide"),
                     (dict(heads=4, norm="sideways", activation="gelu"), "post or pre"),
                     (dict(heads=4, norm="pre", activation="gelu", d_model=16), "the tensors decide")):
        try:
            tscope.load(path, **kw)
            raise AssertionError(f"no error for {kw}")
        except tscope.TscopeError as err:
            assert part in str(err), (kw, str(err))
    try:
        tscope.load(MODEL, heads=4)
        raise AssertionError("no error")
    except tscope.TscopeError as err:
        assert "brings its own config" in str(err), str(err)


@test
def a_20_run_sweep_changes_every_run():
    # The time is printed for the record; speed is judged by `make bench` (bench_sweep.py beside
    # PyTorch in the same run), never by a timed assertion here.
    t0 = time.perf_counter()
    runs = sweep(m, ids, other)
    dt = time.perf_counter() - t0
    print(f"  20-run sweep from Python: {dt * 1000:.1f} ms")
    clean = m(ids)
    assert len(runs) == 18 and all(np.isfinite(r).all() for r in runs)
    assert all(r.shape == clean.shape for r in runs)
    knocked = runs[:8] + runs[16:]  # head and FFN knock-outs on the clean input: each edit takes effect
    assert all(np.abs(r - clean).max() > 1e-4 for r in knocked), [float(np.abs(r - clean).max()) for r in knocked]


if __name__ == "__main__":
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
