#!/usr/bin/env bash
# The command line's interventions against PyTorch (tests/ref/python, made by
# make_fixtures.py on assets/induction-2l.safetensors): one head's output patched from
# another run's trace (--patch TRACE:ATTN.headK[@POS]), a steering vector (--add
# STEP[@POS]=VEC.npy), a mean ablation over a reference set (--mean-from TRACE), and
# edits while generating; each within 1e-4 of PyTorch's logits (run --expect). Then the
# sweeps' numbers at full precision, every cell of patch --site resid|attn|ffn|heads and
# attribute at every position against PyTorch's.
. "$(dirname "$0")/lib.sh"

M=assets/induction-2l.safetensors
R=tests/ref/python
POS=$(cat $R/pos.txt)

# agree NAME ARGS...: run's logits within 1e-4 of $R/NAME_logits.npy
agree() {
    local what=$1 fixture=$R/$1_logits.npy
    shift
    expect 0 "$what" -- "$bin" run --load $M "$@" --expect "$fixture" --tol 1e-4
    grep -q "agrees within tol" <<<"$out" || bad "$what: $(grep expect <<<"$out")"
}

expect 0 "the clean trace" -- "$bin" run --load $M --ids $R/ids.npy --trace "$tmp/clean.tstrace" --level values
expect 0 "the reference set's trace" -- "$bin" run --load $M --ids $R/ref_ids.npy --trace "$tmp/ref.tstrace" --level values

agree plain --ids $R/ids.npy
agree head_patch --ids $R/other_ids.npy --patch "$tmp/clean.tstrace:decoder.layers.1.self_attn.head1"
agree head_patch_pos --ids $R/other_ids.npy --patch "$tmp/clean.tstrace:decoder.layers.1.self_attn.head1@$POS"
agree steer --ids $R/ids.npy --add "decoder.layers.0.out=$R/steer.npy"
agree steer_pos --ids $R/ids.npy --add "decoder.layers.0.out@$POS=$R/steer.npy"
agree mean_ref --ids $R/ids.npy --ablate decoder.layers.1.self_attn.head1=mean --mean-from "$tmp/ref.tstrace"
grep -q "edit decoder.layers.1.self_attn.head1=mean: replaced by its mean, 1 step" <<<"$out" || bad "the edit's report: $out"

# a trace of an edited run names its edits
expect 0 "a traced --add" -- "$bin" run --load $M --ids $R/ids.npy --add "decoder.layers.0.out=$R/steer.npy" \
    --trace "$tmp/steer.tstrace" --level values
expect 0 "info of it" -- "$bin" info "$tmp/steer.tstrace"
grep -q "added to" <<<"$out" || bad "info does not say what --add did: $out"

# refusals, one sentence each
expect 2 "a vector of the wrong size" -- "$bin" run --load $M --ids $R/ids.npy --add "decoder.layers.0.out=$R/ids.npy"
grep -q "give \[64\]" <<<"$err" || bad "wrong vector: $err"
expect 2 "--mean-from without a mean ablation" -- "$bin" run --load $M --ids $R/ids.npy --mean-from "$tmp/ref.tstrace"
grep -q "no mean ablation" <<<"$err" || bad "mean-from alone: $err"
expect 2 "a head that does not exist" -- "$bin" run --load $M --ids $R/other_ids.npy \
    --patch "$tmp/clean.tstrace:decoder.layers.1.self_attn.head7"
grep -q "head0 to head3" <<<"$err" || bad "head7: $err"
expect 0 "a glob over steps and inputs" -- "$bin" run --load $M --ids $R/ids.npy --ablate 'decoder.layers.1.*'
has "$out" "zeroed, 28 steps; 5 more matched and were left alone" "what a glob edit left alone is said"
expect 2 "a name of no step" -- "$bin" run --load $M --ids $R/ids.npy --ablate decoder.layers.1.nothing
has "$err" "tscope info lists them from a trace of it" "the hint names a command that lists the steps"
expect 2 "--print-shapes of a checkpoint" -- "$bin" run --load $M --ids $R/ids.npy --print-shapes
has "$err" "--level shapes" "--print-shapes says how to list a checkpoint's steps"
expect 2 "--add @POS past the text" -- "$bin" run --load $M --ids $R/ids.npy --add "decoder.layers.0.out@99=$R/steer.npy"
grep -q "positions 0 to 63" <<<"$err" || bad "@99: $err"

# generate: the edits act at every new token
P=HwIjnuLOIpexbNNJaKIn
expect 0 "generate" -- "$bin" generate --load $M --prompt $P -n 24 --temperature 0 --quiet
plain=$out
expect 0 "generate --add" -- "$bin" generate --load $M --prompt $P -n 24 --temperature 0 --quiet \
    --add "decoder.layers.0.out=$R/steer.npy"
[ "$out" != "$plain" ] || bad "generate --add changed nothing: $out"
steered=$out
# the same steered text through run, one token at a time: run --add agrees with each draw
expect 0 "generate --add --trace" -- "$bin" generate --load $M --prompt $P -n 24 --temperature 0 --quiet \
    --add "decoder.layers.0.out=$R/steer.npy" --trace "$tmp/gen.tstrace"
[ "$(head -1 <<<"$out")" = "$steered" ] || bad "generate --trace changed the text: $out / $steered"
expect 0 "generate --ablate head=mean --mean-from" -- "$bin" generate --load $M --prompt $P -n 8 --temperature 0 \
    --quiet --ablate decoder.layers.1.self_attn.head1=mean --mean-from "$tmp/ref.tstrace"
expect 2 "generate --patch" -- "$bin" generate --load $M --prompt $P -n 8 \
    --patch "$tmp/clean.tstrace:decoder.layers.1.self_attn.head1"
grep -q "one new position at a time" <<<"$err" || bad "generate --patch: $err"
expect 2 "generate =mean alone" -- "$bin" generate --load $M --prompt $P -n 8 --ablate decoder.layers.1.self_attn.head1=mean
grep -q "mean-from" <<<"$err" || bad "generate =mean: $err"
# the sweeps' numbers at full precision: --npz and --json agree with each other and with the table
T=$(sed -n 1p tests/ref/experiments/texts.txt)
expect 0 "ablate --npz --json" -- "$bin" ablate --load $M --text "$T" --positions 33-63 --npz "$tmp/a.npz" \
    --json "$tmp/a.json"
[ ! -e ablate.png ] || bad "ablate drew ablate.png though the numbers went to files"
py=/usr/bin/python3
[ -x $py ] || py=python3
if $py -c 'import numpy' 2>/dev/null; then
    $py - "$tmp" "$out" <<'PY' && ok || bad "ablate --npz does not round-trip"
import json, sys
import numpy as np
tmp, table = sys.argv[1], sys.argv[2]
a, j = np.load(tmp + "/a.npz"), json.load(open(tmp + "/a.json"))
assert a["loss_change"].shape == (2, 5) and a["loss_change"].dtype == np.float32
assert np.array_equal(np.array(j["loss_change"], dtype=np.float32), a["loss_change"])
assert np.array_equal(np.array(j["loss_change_span"], dtype=np.float32), a["loss_change_span"])
assert j["span"] == [33, 63] and abs(j["base"] - float(a["base"])) < 1e-6
# the table's 3 decimals are the stored numbers rounded
rows = [l.split() for l in table.splitlines() if l.strip()[:1].isdigit() and ("head" in l or "ffn" in l)]
for r in rows:
    layer, col = int(r[0]), (int(r[2]) if r[1] == "head" else 4)
    assert f"{a['loss_change'][layer, col]:+.3f}" == r[-2], (r, a["loss_change"][layer, col])
PY
else
    bad "no numpy for python3 (scripts/deps.sh installs python3-numpy)"
fi
# patch on make_fixtures.py's texts (18 letters, then their first 17; the corrupted text's 18th is G)
{ read -r clean; read -r corrupt; read -r answer; read -r wrong; } <$R/patch.txt
for site in heads attn ffn resid; do
    expect 0 "patch --site $site" -- "$bin" patch --load $M --clean "$clean" --corrupt "$corrupt" \
        --answer "$answer" --site $site --json "$tmp/p-$site.json" --npz "$tmp/p-$site.npz"
    has "$out" "logit($answer) - logit($wrong) at the last position" "patch --site $site: the corrupted text's guess"
done
# layer 0's head 3 reads the changed letter (position 17: it looks one back); layer 1's head 1 moves it to the end
printf '%s\n' "$out" >/dev/null
$py - "$tmp" <<'PY' && ok || bad "patch --site heads: the heads that carry the answer"
import json, sys
import numpy as np
tmp = sys.argv[1]
j = json.load(open(tmp + "/p-heads.json"))
r = np.array(j["restored"])
assert r.shape == (8, 35) and j["steps"][3] == "decoder.layers.0.self_attn.head3", j["steps"]
assert np.argmax(r[:4, 17]) == 3 and np.argmax(r[4:, -1]) == 1, r[:, [17, -1]]
assert np.array_equal(np.load(tmp + "/p-heads.npz")["restored"], np.array(j["restored"], dtype=np.float32))
a = json.load(open(tmp + "/p-attn.json"))
assert a["steps"] == ["decoder.layers.0.self_attn.out", "decoder.layers.1.self_attn.out"] and abs(a["restored"][1][-1] - 1) < 0.05
assert len(json.load(open(tmp + "/p-resid.json"))["steps"]) == 3
PY
# every cell of each site's sweep against PyTorch's (make_fixtures.py's patch_SITE.npy: the same
# patch as a forward hook on a float64 model) within 1e-4, and the clean and corrupted differences
$py - "$tmp" $R <<'PY' && ok || bad "patch --site resid|attn|ffn|heads against PyTorch"
import sys
import numpy as np
tmp, ref = sys.argv[1], sys.argv[2]
want_diffs = np.load(f"{ref}/patch_diffs.npy")
for site in ("resid", "attn", "ffn", "heads"):
    a = np.load(f"{tmp}/p-{site}.npz")
    got, want = a["restored"], np.load(f"{ref}/patch_{site}.npy")
    assert got.dtype == np.float32 and got.shape == want.shape, (site, got.shape, want.shape)
    d = float(np.abs(got.astype(np.float64) - want).max())
    dd = float(np.abs(np.array([a["clean_diff"], a["corrupt_diff"]], dtype=np.float64) - want_diffs).max())
    print(f"  patch --site {site}: largest difference from PyTorch {d:.2e} over {got.size} cells, "
          f"{dd:.2e} in d(clean) and d(corrupted)")
    assert d <= 1e-4 and dd <= 1e-4, (site, d, dd)
PY
expect 2 "patch --site nowhere" -- "$bin" patch --load $M --clean abcd --corrupt abce --answer d --site nowhere

# attribute at every position, from one forward pass, against PyTorch's float64 attribution
# (make_fixtures.py's dla_diff, dla_token, dla_top): every share within 1e-4; the numbers at full
# precision (the npz and the JSON hold the same float32s, the table prints them rounded)
for what in diff token top; do
    case $what in
    diff) flags=(--answer d --wrong G) ;;
    token) flags=(--token e) ;;
    top) flags=() ;;
    esac
    expect 0 "attribute --position all ($what)" -- "$bin" attribute --load $M --text "$T" --position all \
        "${flags[@]}" --npz "$tmp/dla-$what.npz" --json "$tmp/dla-$what.json"
    printf '%s\n' "$out" >"$tmp/dla-$what.txt"
done
[ ! -e attribute.png ] || bad "attribute drew attribute.png though the numbers went to files"
$py - "$tmp" $R <<'PY' && ok || bad "attribute --position all against PyTorch"
import json, sys
import numpy as np
tmp, ref = sys.argv[1], sys.argv[2]
for what in ("diff", "token", "top"):
    a, j = np.load(f"{tmp}/dla-{what}.npz"), json.load(open(f"{tmp}/dla-{what}.json"))
    want = np.load(f"{ref}/dla_{what}.npy")
    got = a["shares"]
    assert got.dtype == np.float32 and got.shape == want.shape == (64, 14), (got.shape, want.shape)
    d = float(np.abs(got.astype(np.float64) - want).max())
    print(f"  attribute {what}: largest difference from PyTorch {d:.2e} over {got.size} shares")
    assert d <= 1e-4, (what, d)
    assert np.array_equal(np.array(j["shares"], dtype=np.float32), got), what
    assert np.array_equal(np.array(j["logit"], dtype=np.float32), a["logit"]), what
    assert np.abs(got.astype(np.float64).sum(1) - a["logit"]).max() < 1e-4, what
    assert j["position"] == list(range(64)) and len(j["parts"]) == 14 and j["parts"][6] == "layer 0 FFN", j["parts"]
    if what == "top":
        assert np.array_equal(a["answer"].astype(np.int64), np.load(f"{ref}/dla_top_ids.npy")), what
        assert (a["wrong"] == -1).all()
    # the table's cells are the stored numbers rounded to 2 decimals (part rows, position columns)
    rows = {l[:22].strip(): l[22:].split() for l in open(f"{tmp}/dla-{what}.txt") if l[:1] not in "#p"}
    for k, part in enumerate(j["parts"]):
        assert [f"{v:.2f}" for v in got[:, k]] == rows[part], (what, part)
PY
# one position: the same shares as its column of --position all
expect 0 "attribute --position 45 --npz" -- "$bin" attribute --load $M --text "$T" --position 45 --answer d \
    --wrong G --npz "$tmp/dla-45.npz"
has "$out" "logit('d') - logit('G') at position 45" "the difference at one position"
$py - "$tmp" <<'PY' && ok || bad "attribute --position 45 is --position all's row 45"
import sys
import numpy as np
tmp = sys.argv[1]
one, every = np.load(tmp + "/dla-45.npz"), np.load(tmp + "/dla-diff.npz")
assert one["shares"].shape == (1, 14) and np.array_equal(one["shares"][0], every["shares"][45])
assert one["position"].tolist() == [45.0]
PY
expect 0 "attribute by id" -- "$bin" attribute --load $M --text "$T" --position all --answer d --wrong id:0 \
    --npz "$tmp/dla-id.npz"
expect 2 "--answer without --wrong" -- "$bin" attribute --load $M --text "$T" --answer d
has "$err" "give --wrong Y too" "--answer alone"
expect 2 "--token and --answer" -- "$bin" attribute --load $M --text "$T" --token d --answer d --wrong G
has "$err" "give one" "--token with --answer"
expect 2 "--wrong the answer" -- "$bin" attribute --load $M --text "$T" --answer d --wrong d
has "$err" "the same token" "--wrong the same as --answer"
expect 2 "--position nowhere" -- "$bin" attribute --load $M --text "$T" --position last
has "$err" "or all" "--position last"
expect 2 "an id past the vocabulary" -- "$bin" attribute --load $M --text "$T" --token id:73
has "$err" "0 to 72" "id:73"
# a checkpoint without a tokenizer reads --ids: GPT-NeoX's parallel residual adds up too; Llama's RMSNorm is refused
H=tests/ref/hf
$py -c "import numpy as np, sys; [np.save(f'$tmp/{m}1.npy', np.load(f'$H/{m}/ids.npy')[:1]) for m in ('gpt_neox', 'llama')]"
expect 0 "attribute --ids (GPT-NeoX)" -- "$bin" attribute --load $H/gpt_neox --ids "$tmp/gpt_neox1.npy" --position all \
    --answer id:3 --wrong id:5 --npz "$tmp/neox.npz"
$py - "$tmp" <<'PY' && ok || bad "GPT-NeoX's shares add up to its logit differences"
import sys
import numpy as np
a = np.load(sys.argv[1] + "/neox.npz")
assert a["shares"].shape == (12, 2 + 2 * (4 + 2)), a["shares"].shape
assert np.abs(a["shares"].astype(np.float64).sum(1) - a["logit"]).max() < 1e-4
PY
expect 2 "attribute on an RMSNorm model" -- "$bin" attribute --load $H/llama --ids "$tmp/llama1.npy" --npz "$tmp/l.npz"
has "$err" "final norm as a LayerNorm" "an RMSNorm is refused"
expect 2 "--ids of two sequences" -- "$bin" attribute --load $H/gpt_neox --ids $H/gpt_neox/ids.npy --npz "$tmp/n.npz"
has "$err" "holds 2 sequences" "--ids (2, S)"
expect 2 "--text and --ids" -- "$bin" attribute --load $M --text "$T" --ids $R/ids.npy
has "$err" "choose one" "--text with --ids"
finish
