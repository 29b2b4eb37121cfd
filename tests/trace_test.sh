#!/usr/bin/env bash
# Trace commands end to end: run --trace at each level, info, export (checked
# with numpy when it is there), diff, a killed run's .tmp, and bad input
# (one line on stderr, exit 2). Runs ./tscope, or $TSCOPE.
. "$(dirname "$0")/lib.sh"
work=$tmp

has() { case $1 in *"$2"*) ok ;; *) bad "$3: no '$2' in: $(printf '%s' "$1" | head -c 400)" ;; esac; }
lines() { printf '%s\n' "$1" | grep -c .; }

t=$work/tiny.tstrace
expect 0 "run --trace values" -- "$bin" run --preset tiny --trace "$t" --level values
has "$out" "trace: $t: " "run reports the trace"
has "$out" "values for every step" "run reports the policy"
[ -f "$t" ] && [ ! -e "$t.tmp" ] && ok || bad "the trace is not at its final name"
steps=$(printf '%s\n' "$out" | sed -n 's/^trace: .*: \([0-9]*\) steps.*/\1/p')

expect 0 "info" -- "$bin" info "$t"
has "$out" "$steps steps" "info names the step count"
has "$out" "encoder.layers.0.self_attn.weights" "info lists the attention weights"
has "$out" "softmax" "info shows ops"
has "$out" "[1, 2, 4, 4]" "info shows shapes"
[ "$(lines "$out")" = $((steps + 3)) ] && ok || bad "info: $(lines "$out") lines for $steps steps"
expect 0 "info --only" -- "$bin" info "$t" --only '*.weights' --only 'embed.pe'
[ "$(printf '%s\n' "$out" | grep -c 'weights\|embed.pe')" = 7 ] && ok || bad "info --only: $out"
expect 0 "info shows views" -- "$bin" info "$t" --only '*.q'
has "$out" "(view of #" "chunks of a stored step are views"

# export: numpy reads it with the trace's shapes and values
npz=$work/tiny.npz
expect 0 "export" -- "$bin" export "$t" --npz "$npz"
has "$out" "$steps arrays" "export writes every step"
py=
for p in /usr/bin/python3 python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then py=$p; break; fi
done
if [ -n "$py" ]; then
    expect 0 "numpy loads the export" -- "$py" -c '
import sys, numpy as np
z = np.load(sys.argv[1])
w = z["encoder.layers.0.self_attn.weights"]
assert w.shape == (1, 2, 4, 4), w.shape
assert np.allclose(w.sum(-1), 1, atol=1e-5), w.sum(-1)
q, qkv = z["encoder.layers.0.self_attn.q"], z["encoder.layers.0.self_attn.qkv"]
assert q.shape == (1, 2, 4, 8) and qkv.shape == (1, 4, 48)
# q is head h of qkv viewed (B, S, H, 3*hd) and permuted, as the model does
h = qkv.reshape(1, 4, 2, 24).transpose(0, 2, 1, 3)[..., :8]
assert np.array_equal(q, h)
print(len(z.files))
' "$npz"
    [ "$out" = "$steps" ] && ok || bad "numpy sees $out arrays, want $steps"
else
    echo "numpy not found: export checked as a zip only"
    expect 0 "the export is a zip" -- unzip -l "$npz"
fi
# a traced statistic, quoted: the min, max, mean and std info prints for a step are those of the
# values export wrote, computed here apart (the population std, as torch.std(unbiased=False)), to
# the 4 digits info gives; a std of n - 1, or one without its square root, is far off on these
# small steps (32 and 64 values). The standard library only: this check never skips.
for s in encoder.layers.0.self_attn.weights embed.pe encoder.layers.0.self_attn.scores; do
    expect 0 "info --only $s" -- "$bin" info "$t" --only "$s"
    row=$(printf '%s\n' "$out" | grep -F "  $s  ")
    expect 0 "the traced statistics of $s" -- python3 -c '
import ast, math, struct, sys, zipfile
npz, name, row = sys.argv[1:]
raw = zipfile.ZipFile(npz).read(name + ".npy")
n = struct.unpack("<H", raw[8:10])[0]
head = ast.literal_eval(raw[10:10 + n].decode())
assert head["descr"] == "<f4", head
x = struct.unpack("<%df" % (len(raw[10 + n:]) // 4), raw[10 + n:])
mean = math.fsum(x) / len(x)
std = math.sqrt(math.fsum((v - mean) ** 2 for v in x) / len(x))
got = [float(w) for w in row.split("]", 1)[1].split()[:4]]
for what, g, w in zip(("min", "max", "mean", "std"), got, (min(x), max(x), mean, std)):
    if abs(g - w) > 5e-4 * abs(w) + 1e-6:
        sys.exit("%s of %s: info says %g, the values give %.6g" % (what, name, g, w))
' "$npz" "$s" "$row"
done

# hd = 4: scaled is scores x 0.5, a power of two, so it is stored as a scaled
# view of scores; an eval-mode dropout is a view of the activation.
t4=$work/hd4.tstrace
expect 0 "run with hd 4" -- "$bin" run --preset tiny --heads 4 --trace "$t4" --level values
expect 0 "info shows a scaled view" -- "$bin" info "$t4" --only '*.scaled' --only '*ffn.dropout'
has "$out" "x 0.5)" "scaled is a view of scores x 0.5"
has "$out" "dropout" "info lists the dropout"
n_steps=$(printf '%s\n' "$out" | grep -cE '^ *[0-9]+  ')
[ "$n_steps" -ge 4 ] && [ "$(printf '%s\n' "$out" | grep -c '(view of #')" = "$n_steps" ] && ok ||
    bad "every scaled and dropout step is a view: $out"
expect 0 "export of scaled views" -- "$bin" export "$t4" --npz "$work/hd4.npz"
if [ -n "$py" ]; then
    expect 0 "numpy: scaled = scores * 0.5 exactly" -- "$py" -c '
import sys, numpy as np
z = np.load(sys.argv[1])
for l in (0, 1):
    p = "encoder.layers.%d.self_attn." % l
    s, c = z[p + "scores"], z[p + "scaled"]
    assert s.shape == c.shape == (1, 4, 4, 4), s.shape
    assert np.array_equal(c, s * np.float32(0.5)), abs(c - s * 0.5).max()
    assert np.array_equal(z["encoder.layers.%d.ffn.dropout" % l], z["encoder.layers.%d.ffn.act" % l])
    h = z["encoder.layers.%d.ffn.hidden" % l]
    assert np.array_equal(z["encoder.layers.%d.ffn.act" % l], np.where(h < 0, np.float32(0), h))
# Unmasked attention scales each head just before its softmax when the
# writer records scaled from the scores: the weights must not notice.
for p in ("encoder.layers.0.self_attn.", "decoder.layers.1.cross_attn."):
    c, w = z[p + "scaled"].astype(np.float64), z[p + "weights"]
    e = np.exp(c - c.max(-1, keepdims=True))
    assert np.allclose(w, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6), p
' "$work/hd4.npz"
fi

expect 0 "export --only" -- "$bin" export "$t" --npz "$work/w.npz" --only '*.weights'
has "$out" "6 arrays" "export --only"

# diff: a trace against itself, against another seed
expect 0 "diff A A" -- "$bin" diff "$t" "$t"
has "$out" "no step differs" "diff of a trace with itself"
t2=$work/seed1.tstrace
expect 0 "run --seed 1" -- "$bin" run --preset tiny --seed 1 --trace "$t2" --level values
expect 1 "diff A B" -- "$bin" diff "$t" "$t2"
has "$out" "first divergence: step" "diff names the first divergence"
expect 0 "diff with a huge tolerance" -- "$bin" diff "$t" "$t2" --tol 1e9

# levels: stats keep no values (export refuses), shapes keep no statistics
ts=$work/stats.tstrace
expect 0 "run --level stats" -- "$bin" run --preset tiny --trace "$ts" --level stats
expect 1 "export of a stats trace" -- "$bin" export "$ts" --npz "$work/s.npz"
has "$err" "no step keeps values" "export says why it wrote nothing"
[ ! -e "$work/s.npz" ] && ok || bad "export left a file behind"
expect 0 "diff values vs stats compares statistics" -- "$bin" diff "$t" "$ts"
has "$out" "(stats)" "diff falls back to statistics"
expect 0 "run --level shapes" -- "$bin" run --preset tiny --trace "$work/sh.tstrace" --level shapes
expect 0 "info shapes" -- "$bin" info "$work/sh.tstrace"

# a run killed mid-write: its .tmp opens up to the last complete step
size=$(stat -c %s "$t")
head -c $((size / 2)) "$t" >"$work/killed.tstrace.tmp"
expect 0 "info on a cut file" -- "$bin" info "$work/killed.tstrace.tmp"
has "$err" "read by scanning" "info warns about the cut file"
expect 2 "info PATH when only PATH.tmp exists" -- "$bin" info "$work/killed.tstrace"
has "$err" "killed.tstrace.tmp" "the error points at the .tmp file"

# bad input: one line on stderr, exit 2
expect 2 "info on a missing file" -- "$bin" info "$work/nope.tstrace"
[ "$(lines "$err")" = 1 ] && ok || bad "missing file: $(lines "$err") lines on stderr"
printf 'not a trace at all, just some words' >"$work/junk"
expect 2 "info on junk" -- "$bin" info "$work/junk"
has "$err" "not a tscope trace" "junk is named as such"
expect 2 "info without a file" -- "$bin" info
expect 2 "export without --npz" -- "$bin" export "$t"
expect 2 "diff with one file" -- "$bin" diff "$t"
expect 2 "--level without --trace" -- "$bin" run --preset tiny --level values
expect 2 "--keep-batch past the batch" -- "$bin" run --preset tiny --trace "$work/k.tstrace" --keep-batch 5
has "$err" "not a batch element" "--keep-batch names the batch"
expect 2 "--only with --level stats" -- "$bin" run --preset tiny --trace "$work/k.tstrace" --level stats --only x
expect 2 "--level nonsense" -- "$bin" run --preset tiny --trace "$work/k.tstrace" --level lots
expect 2 "a trace in a missing directory" -- "$bin" run --preset tiny --trace "$work/no/such/dir/t.tstrace"
has "$err" "cannot create" "the error names the file"

# ---- the op and tag numbers: core.h, docs/trace-format.md and the PyTorch bridge agree ----
# list NAME FILE: the names of one numbering, in order, as FILE spells them
header_list() { sed -n "s/^ *X(TS_${1}_[A-Z_0-9]*, \"\([a-z_]*\)\").*/\1/p" include/tscope/core.h | tr '\n' ' '; }
doc_list() { awk -v h="| $1 | name |" 'index($0, h) == 1 { on = 1; next } on && /^\|---/ { next }
    on && /^\| *[0-9]+ \|/ { split($0, c, "|"); gsub(/[ `]/, "", c[3]); printf "%s ", c[3]; next } on { exit }' docs/trace-format.md; }
bridge_list() { awk -v n="$1 = [" 'index($0, n) == 1 { on = 1 } on { t = t $0 } on && /\]/ { exit } END {
    sub(/^[^[]*\[/, "", t); sub(/\].*/, "", t); gsub(/[", ]+/, " ", t); sub(/^ /, "", t); print t }' python/tscope_format.py; }
for kind in OP:op TAG:tag; do
    macro=${kind%%:*} col=${kind#*:}
    h=$(header_list "$macro")
    [ -n "$h" ] || bad "no TS_${macro}_LIST names found in core.h"
    d=$(doc_list "$col")
    [ "$d" = "$h" ] && ok || bad "docs/trace-format.md's ${col} table is not core.h's list: '$d' vs '$h'"
    py=$(bridge_list "${macro}S")
    [ "$py" = "$h" ] && ok || bad "python/tscope_format.py's ${macro}S (the bridge's) is not core.h's list: '$py' vs '$h'"
done

finish
