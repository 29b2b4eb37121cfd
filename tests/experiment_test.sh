#!/usr/bin/env bash
# Experiments (docs/experiments.md) on the shipped induction model, against
# PyTorch: tests/ref/experiments/make_fixtures.py rebuilt the model in torch
# and edited it with forward hooks (heads zeroed, heads and a step replaced by
# their mean, a position of a layer's output patched from a clean run, the
# logit lens); its traces are committed, so this test needs no torch. Every
# edited run equals PyTorch's within 1e-4; what cannot work is one line, exit
# 2, and no file written.
. "$(dirname "$0")/lib.sh"
ref=tests/ref/experiments
model=assets/induction-2l.safetensors
clean=$(sed -n 1p $ref/texts.txt)
corrupt=$(sed -n 2p $ref/texts.txt)

one_line() { [ "$(printf '%s\n' "$err" | grep -c .)" = 1 ] && [ -z "$out" ] && ok || bad "$1: not one line: $err / $out"; }
# same_as REF TRACE WHAT: every step both have equals PyTorch's within 1e-4
same_as() {
    expect 0 "diff $3" -- "$bin" diff --common --tol 1e-4 "$1" "$2"
    has "$out" "no step differs beyond tol 0.0001" "$3 equals PyTorch"
}

# ---- nothing edited: the same model as PyTorch's ----
expect 0 "run clean" -- "$bin" run --load $model --text "$clean" --trace "$tmp/clean.tstrace" --level values
same_as $ref/plain.tstrace "$tmp/clean.tstrace" "the unedited run"

# ---- two layer-1 heads zeroed ----
expect 0 "ablate heads" -- "$bin" run --load $model --text "$clean" --ablate decoder.layers.1.self_attn.head0 \
    --ablate decoder.layers.1.self_attn.head1 --trace "$tmp/zero.tstrace" --level values
has "$out" "# edit decoder.layers.1.self_attn.head0: zeroed, 1 step" "the edit is reported"
same_as $ref/zero.tstrace "$tmp/zero.tstrace" "heads 0 and 1 of layer 1 zeroed"
# a glob over heads is the same edit
expect 0 "ablate head glob" -- "$bin" run --load $model --text "$clean" \
    --ablate 'decoder.layers.1.self_attn.head[01]' --trace "$tmp/glob.tstrace" --level values
same_as $ref/zero.tstrace "$tmp/glob.tstrace" "head[01]"
# the trace says it was edited, and how
expect 0 "info zero" -- "$bin" info "$tmp/zero.tstrace"
has "$out" "edited run: decoder.layers.1.self_attn.head0 zeroed; decoder.layers.1.self_attn.head1 zeroed" \
    "info names the run's edits"
printf '%s\n' "$out" | grep -E '^ *[0-9]+ +decoder\.layers\.1\.self_attn\.values .*\[edited: head0 zeroed; head1 zeroed\]$' \
    >/dev/null && ok || bad "info marks the edited step"
[ "$(printf '%s\n' "$out" | grep -c 'edited:')" = 1 ] && ok || bad "info marks only the edited step"
# --scores: the second copy's loss, low with the heads, up with them gone
expect 0 "scores" -- "$bin" run --load $model --scores
base=$(printf '%s\n' "$out" | sed -n 's/^loss per token: \([0-9.]*\) in the first half, \([0-9.]*\) in the second.*/\1 \2/p')
expect 0 "scores ablated" -- "$bin" run --load $model --scores --ablate 'decoder.layers.1.self_attn.head[01]'
abl=$(printf '%s\n' "$out" | sed -n 's/^loss per token: \([0-9.]*\) in the first half, \([0-9.]*\) in the second.*/\1 \2/p')
has "$out" "# with zeroed decoder.layers.1.self_attn.head[01]" "the table says what was ablated"
awk -v b="$base" -v a="$abl" 'BEGIN { split(b, x, " "); split(a, y, " ");
    exit !(x[2] < 0.5 * x[1] && y[2] > y[1]) }' && ok ||
    bad "second copy: $base unedited, $abl ablated (want it far below the first, then above it)"

# ---- mean ablation: a head's slice and a whole step ----
expect 0 "ablate mean" -- "$bin" run --load $model --text "$clean" --ablate decoder.layers.0.self_attn.head2=mean \
    --ablate decoder.layers.1.ffn.out=mean --trace "$tmp/mean.tstrace" --level values
same_as $ref/mean.tstrace "$tmp/mean.tstrace" "head 2 of layer 0 and layer 1's ffn.out mean-ablated"

# ---- a position of layer 0's output patched from the clean run ----
expect 0 "patch" -- "$bin" run --load $model --text "$corrupt" --patch "$tmp/clean.tstrace:decoder.layers.0.out@27" \
    --trace "$tmp/patch.tstrace" --level values
same_as $ref/patch.tstrace "$tmp/patch.tstrace" "position 27 of decoder.layers.0.out patched"

# ---- the logit lens ----
expect 0 "lens" -- "$bin" run --load $model --text "$clean" --lens --trace "$tmp/lens.tstrace" --level values
has "$out" "layer 1:" "the lens table"
expect 0 "diff lens" -- "$bin" diff --common --tol 1e-4 $ref/plain.tstrace "$tmp/lens.tstrace"
has "$out" "no step differs beyond tol 0.0001 (9 steps compared)" "lens.layers.0 and 1 equal PyTorch's"

# the lens view: layers down, positions across, in PNG, SVG and PDF
for ext in png svg pdf; do
    expect 0 "png lens .$ext" -- "$bin" png "$tmp/lens.tstrace" --tensor lens.layers.0 -o "$tmp/lens.$ext"
    has "$out" "view lens" "the lens view is chosen for lens.layers.N ($ext)"
    [ -s "$tmp/lens.$ext" ] && ok || bad "no lens.$ext"
done
[ "$(png_colors "$tmp/lens.png" 100x100+100+120)" -gt 20 ] && ok || bad "the lens grid has its colours"
expect 2 "--view lens on another step" -- "$bin" png "$tmp/lens.tstrace" --tensor logits --view lens -o "$tmp/no.png"
has "$err" "lens.layers.N" "--view lens on logits is refused"
[ ! -e "$tmp/no.png" ] && ok || bad "--view lens on logits wrote a file"

# ---- other models: an encoder-decoder's cross-attention, a loaded nn.TransformerEncoder ----
expect 0 "tiny cross_attn" -- "$bin" run --preset tiny --ablate decoder.layers.0.cross_attn.head1 \
    --ablate 'encoder.layers.*.ffn.out=mean' --lens --trace "$tmp/tiny.tstrace"
has "$out" "# edit encoder.layers.*.ffn.out=mean: replaced by its mean, 2 steps" "a glob edits every layer"
has "$out" "layer 1:" "the lens of an encoder-decoder's decoder"
expect 0 "info tiny" -- "$bin" info "$tmp/tiny.tstrace"
has "$out" "[edited: head1 zeroed]" "the cross-attention's values are marked"
expect 0 "loaded encoder" -- "$bin" run --load tests/ref/load_encoder/weights.safetensors \
    --input tests/ref/load_encoder/x.npy --heads 4 --norm pre --activation gelu --ablate encoder.layers.1.self_attn.head3
has "$out" "# edit encoder.layers.1.self_attn.head3: zeroed, 1 step" "a loaded encoder's head"

# ---- the sweeps ----
expect 0 "ablate sweep" -- "$bin" ablate --load $model --text "$clean" --positions 33-63 -o "$tmp/ablate.png"
has "$out" "loss 2.602 nats/token over tokens 1-63, 0.318 over tokens 33-63 (the span)" "the unedited loss"
# the sweep's row for a head is the loss of run --ablate with that head zeroed (the same edit)
row=$(printf '%s\n' "$out" | awk '$1 == 1 && $2 == "head" && $3 == 1 { print $4 }')
[ -n "$row" ] && awk -v d="$row" 'BEGIN { exit !(d > 1) }' && ok || bad "layer 1 head 1 matters to the whole text: $row"
[ "$(printf '%s\n' "$out" | grep -cE '^ +[01]  (head [0-3]|ffn) ')" = 10 ] && ok || bad "10 rows: 4 heads and the FFN, 2 layers"
[ "$(png_size "$tmp/ablate.png")" = "760x300" ] && ok || bad "ablate.png is $(png_size "$tmp/ablate.png")"
[ "$(png_colors "$tmp/ablate.png" 300x80+120+90)" -gt 5 ] && ok || bad "the heatmap has its colours"
for ext in svg pdf; do
    expect 0 "ablate -o .$ext" -- "$bin" ablate --load $model --text "$clean" --mean -o "$tmp/ablate.$ext"
    [ -s "$tmp/ablate.$ext" ] && ok || bad "no ablate.$ext"
done
half=qmKfwTzaRbnLpUchVd
expect 0 "patch sweep" -- "$bin" patch --load $model --clean "$half${half:0:17}" --corrupt "${half:0:17}G${half:0:17}" \
    --answer d -o "$tmp/patch.png"
has "$out" "logit(d) - logit(G) at the last position" "the corrupted text's own guess is the wrong answer"
# the answer sits at position 17 of the first copy until layer 1 moves it to the last position
printf '%s\n' "$out" | awk '$1 == "embed.out" { exit !($19 == "1.00" && $2 == "0.00") }' && ok || bad "embed.out: all at position 17"
printf '%s\n' "$out" | awk '$1 == "decoder.layers.1.out" { exit !($NF == "1.00" && $19 == "0.00") }' && ok ||
    bad "layers.1.out: all at the last position"
[ -s "$tmp/patch.png" ] && ok || bad "no patch.png"

# direct logit attribution: the shares add up to the model's logit
expect 0 "attribute" -- "$bin" attribute --load assets/kjv-char.safetensors --text "And God sa" -o "$tmp/dla.svg"
has "$out" "the logit of 'i' at position 9 ('a')" "the model's top guess, at the last position"
printf '%s\n' "$out" | awk '/^sum / { s = $2 + 0; l = $NF + 0; exit !(s - l < 1e-3 && l - s < 1e-3 && l > 5) }' && ok ||
    bad "the shares add up to the logit: $(printf '%s\n' "$out" | grep '^sum')"
[ "$(printf '%s\n' "$out" | grep -c '^layer [0-3] head [0-3] ')" = 16 ] && ok || bad "a row per head"
[ -s "$tmp/dla.svg" ] && ok || bad "no dla.svg"
expect 0 "attribute --token --position" -- "$bin" attribute --load $model --text "$clean" --token I --position 39 -o "$tmp/dla.png"
has "$out" "the logit of 'I' at position 39" "the token and position asked for"

# ---- what cannot work: one line, exit 2, no trace written ----
refuse() { # WHAT WANT ARGS...: exit 2, one line naming WANT, no trace
    local what=$1 want=$2
    shift 2
    expect 2 "$what" -- "$bin" run "$@" --trace "$tmp/no.tstrace"
    one_line "$what"
    has "$err" "$want" "$what: the problem named"
    [ ! -e "$tmp/no.tstrace" ] && ok || bad "$what: a trace was written"
}
refuse "no such step" "names no step" --load $model --text "$clean" --ablate decoder.layers.1.attn.out
refuse "no such layer" "layers 0 to 1" --load $model --text "$clean" --ablate decoder.layers.5.self_attn.head0
refuse "no such head" "heads head0 to head3" --load $model --text "$clean" --ablate decoder.layers.1.self_attn.head7
refuse "no such key/value head" "key/value heads kvhead0 to kvhead3" --load $model --text "$clean" --ablate decoder.layers.1.self_attn.kvhead4
refuse "no such layer for a kv head" "heads are ATTN.kvheadK" --load $model --text "$clean" --ablate decoder.layers.5.self_attn.kvhead0
refuse "bad =" "zero or mean" --load $model --text "$clean" --ablate decoder.layers.1.out=half
refuse "a parameter" "is a parameter of the model, not a step it computes; edit decoder.layers.0.norm1.out" --load $model --text "$clean" --ablate decoder.layers.0.norm1.gamma
refuse "the input ids" "is what the model reads, not a step it computes; edit embed.out instead" --load $model --text "$clean" --ablate input
refuse "patch without a step" "TRACE:STEP" --load $model --text "$clean" --patch "$tmp/clean.tstrace"
refuse "patch from no file" "--patch" --load $model --text "$clean" --patch "$tmp/none.tstrace:decoder.layers.0.out"
printf 'not a trace' >"$tmp/junk.tstrace"
refuse "patch from junk" "junk.tstrace" --load $model --text "$clean" --patch "$tmp/junk.tstrace:decoder.layers.0.out"
refuse "patch step missing" "has no step" --load $model --text "$clean" --patch "$tmp/clean.tstrace:decoder.layers.0.nope"
refuse "patch a glob" "not a glob" --load $model --text "$clean" --patch "$tmp/clean.tstrace:decoder.layers.*.out"
refuse "patch shape" "in this run but" --load $model --text "${clean:0:40}" --patch "$tmp/clean.tstrace:decoder.layers.0.out"
refuse "patch position" "positions 0 to 63" --load $model --text "$clean" --patch "$tmp/clean.tstrace:decoder.layers.0.out@64"
expect 0 "stats-only trace" -- "$bin" run --load $model --text "$clean" --trace "$tmp/stats.tstrace" --level stats
refuse "patch without values" "keeps no values" --load $model --text "$clean" --patch "$tmp/stats.tstrace:decoder.layers.0.out"
expect 0 "another model's trace" -- "$bin" run --load assets/kjv-char.safetensors --text "$clean" --trace "$tmp/kjv.tstrace" --level values
refuse "patch from another model" "another model" --load $model --text "$clean" --patch "$tmp/kjv.tstrace:decoder.layers.0.out"
refuse "lens without a vocabulary head" "no vocabulary head" --preset seed004 --lens
# the sweeps: one line, exit 2, no figure
sweep_refuse() { # WHAT WANT COMMAND ARGS...
    local what=$1 want=$2
    shift 2
    rm -f "$tmp/no.png"
    expect 2 "$what" -- "$bin" "$@" -o "$tmp/no.png"
    one_line "$what"
    has "$err" "$want" "$what: the problem named"
    [ ! -e "$tmp/no.png" ] && ok || bad "$what: a figure was written"
}
sweep_refuse "ablate positions" "1 <= A <= B <= 63" ablate --load $model --text "$clean" --positions 40-70
sweep_refuse "ablate positions 0" "1 <= A <= B" ablate --load $model --text "$clean" --positions 0-5
sweep_refuse "ablate not an LM" "language model's checkpoint" ablate --load tests/ref/load_encoder/weights.safetensors --text hi
sweep_refuse "patch lengths" "tokens and --clean" patch --load $model --clean abcd --corrupt abc --answer d
sweep_refuse "patch answer" "give one token" patch --load $model --clean abcd --corrupt abce --answer de
sweep_refuse "patch same guess" "--wrong" patch --load $model --clean "$half${half:0:17}" --corrupt "$half${half:0:17}" --answer d
sweep_refuse "attribute position" "positions 0 to 9" attribute --load assets/kjv-char.safetensors --text "And God sa" --position 10
sweep_refuse "attribute token" "give one token" attribute --load assets/kjv-char.safetensors --text "And God sa" --token ab
expect 2 "ablate -o .jpg" -- "$bin" ablate --load $model --text "$clean" -o "$tmp/a.jpg"
has "$err" ".png, .svg or .pdf" "a figure's format is named"

finish
