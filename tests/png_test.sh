#!/usr/bin/env bash
# `tscope png`: every view of a real `tiny` trace is written as a PNG of the
# expected size, bad input gets one line and exit 2 (nearest names for a typo,
# the --level/--only to re-run with for a step without values, an unwritable
# path before anything is read), and a 200 x 200 heatmap exports in under a
# second. Runs ./tscope (build it first; TSCOPE=path overrides).
. "$(dirname "$0")/lib.sh"

# is_png FILE W H: the file starts with the PNG signature and its IHDR says W x H.
is_png() {
    local sig w h
    sig=$(od -An -tx1 -N8 "$1" 2>/dev/null | tr -d ' \n')
    w=$(od -An -tu1 -j16 -N4 "$1" 2>/dev/null | awk '{print $1*16777216 + $2*65536 + $3*256 + $4}')
    h=$(od -An -tu1 -j20 -N4 "$1" 2>/dev/null | awk '{print $1*16777216 + $2*65536 + $3*256 + $4}')
    [ "$sig" = 89504e470d0a1a0a ] || { bad "$1 is not a PNG"; return; }
    ok
    if [ -n "${2:-}" ]; then
        [ "$w" = "$2" ] && [ "$h" = "$3" ] && ok || bad "$1 is $w x $h, want $2 x $3"
    fi
}

# A figure with a text it could not draw whole is an error here (render.h:
# TSCOPE_CLIPS=error), a warning for users.
export TSCOPE_CLIPS=error

"$bin" run --preset tiny --trace "$tmp/tiny.tstrace" --level values >/dev/null 2>&1 || { echo "cannot make a tiny trace"; echo "0 passed, 1 failed"; exit 1; }
"$bin" run --preset tiny --trace "$tmp/stats.tstrace" --level stats >/dev/null 2>&1 || bad "a stats-only trace"

t=$tmp/tiny.tstrace
attn=encoder.layers.0.self_attn.weights
# view by tag (auto) and by name, each to an explicit file
expect 0 "attention grid" -- "$bin" png "$t" --tensor $attn -o "$tmp/grid.png"
is_png "$tmp/grid.png"
case $out in *"view grid"*) ok ;; *) bad "auto on attention weights: $out" ;; esac
expect 0 "one head" -- "$bin" png "$t" --tensor $attn --head 1 -o "$tmp/head.png" --width 500 --height 400
is_png "$tmp/head.png" 500 400
expect 0 "one head at scale 2" -- "$bin" png "$t" --tensor $attn --head 1 --output "$tmp/head2.png" --width 500 --height 400 --scale 2
is_png "$tmp/head2.png" 1000 800
expect 0 "masked decoder attention" -- "$bin" png "$t" --tensor decoder.layers.1.self_attn.weights -o "$tmp/causal.png"
is_png "$tmp/causal.png"
expect 0 "overview" -- "$bin" png "$t" --tensor $attn --view overview -o "$tmp/overview.png"
is_png "$tmp/overview.png"
case $out in *"view overview"*) ok ;; *) bad "overview: $out" ;; esac
expect 0 "--layer picks the same step in another layer" -- "$bin" png "$t" --tensor $attn --layer 1 -o "$tmp/layer1.png"
expect 0 "positional encoding" -- "$bin" png "$t" --tensor embed.pe -o "$tmp/pe.png"
is_png "$tmp/pe.png"
expect 0 "PE curves" -- "$bin" png "$t" --tensor embed.pe --view curves -o "$tmp/pe_curves.png"
expect 0 "PE heatmap" -- "$bin" png "$t" --tensor embed.pe --view heatmap -o "$tmp/pe_heat.png"
expect 0 "LayerNorm statistics" -- "$bin" png "$t" --tensor encoder.layers.0.norm1.out -o "$tmp/norm.png"
case $out in *"view stats"*) ok ;; *) bad "auto on a norm output: $out" ;; esac
expect 0 "LayerNorm by module name" -- "$bin" png "$t" --tensor encoder.layers.1.norm2 --view stats -o "$tmp/norm2.png"
expect 0 "shapes of a module" -- "$bin" png "$t" --tensor encoder.layers.0.self_attn --view shapes -o "$tmp/shapes.png"
is_png "$tmp/shapes.png"
expect 0 "any tensor" -- "$bin" png "$t" --tensor encoder.layers.0.ffn.hidden -o "$tmp/ffn.png"
expect 0 "any tensor, other axes" -- "$bin" png "$t" --tensor encoder.layers.0.self_attn.q --axes 1,3 --view stats -o "$tmp/q.png"
expect 0 "curves of columns" -- "$bin" png "$t" --tensor encoder.layers.0.out --view curves -o "$tmp/cols.png"
# the default name, in the working directory
(cd "$tmp" && "$bin" png tiny.tstrace --tensor $attn --head 0 >/dev/null 2>&1) && ok || bad "default output name"
[ -f "$tmp/$attn.head0.heatmap.png" ] && ok || bad "no $attn.head0.heatmap.png"
# nothing half-written left behind
leftover=$(find "$tmp" -name '*.png.*' | wc -l)
[ "$leftover" = 0 ] && ok || bad "$leftover temporary files left"

# bad input: one line, exit 2
expect 2 "unknown name" -- "$bin" png "$t" --tensor encoder.layers.0.self_attn.weight
case $err in *"nearest: encoder.layers.0.self_attn.weights"*) ok ;; *) bad "no nearest name: $err" ;; esac
[ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && ok || bad "unknown name: more than one line"
expect 2 "no values kept" -- "$bin" png "$tmp/stats.tstrace" --tensor $attn
case $err in *"--level values --only '$attn'"*) ok ;; *) bad "no re-run hint: $err" ;; esac
expect 2 "unwritable path" -- "$bin" png "$tmp/missing.tstrace" --tensor $attn -o /nonexistent-dir/x.png
case $err in *"/nonexistent-dir/x.png"*) ok ;; *) bad "unwritable path not named: $err" ;; esac
expect 2 "batch out of range" -- "$bin" png "$t" --tensor $attn --batch 3 -o "$tmp/x.png"
expect 2 "head out of range" -- "$bin" png "$t" --tensor $attn --head 2 -o "$tmp/x.png"
expect 2 "grid of a rank-3 step" -- "$bin" png "$t" --tensor encoder.layers.0.out --view grid -o "$tmp/x.png"
expect 2 "no --tensor" -- "$bin" png "$t"
expect 2 "bad scale" -- "$bin" png "$t" --tensor $attn --scale 0
expect 2 "not a trace" -- "$bin" png /dev/null --tensor $attn -o "$tmp/x.png"
[ -e "$tmp/x.png" ] && bad "a failed export left x.png" || ok

# a full-length head: 200 x 200 draws (its time is printed, not asserted: speed is
# for benchmarks, and a loaded machine must not fail a test)
"$bin" run --preset seed000 --batch 1 --layers 1 --trace "$tmp/s200.tstrace" --only '*.weights' >/dev/null 2>&1 || bad "a 200-token trace"
start=$(date +%s%N)
expect 0 "200 x 200 head" -- "$bin" png "$tmp/s200.tstrace" --tensor $attn --head 0 -o "$tmp/h200.png"
echo "a 200 x 200 heatmap: $((($(date +%s%N) - start) / 1000000)) ms"
is_png "$tmp/h200.png"

# the overview draws every layer, so a glob over the layers names it (lessons write it so)
"$bin" png "$t" --tensor 'encoder.layers.*.self_attn.weights' --view overview -o "$tmp/glob.png" >/dev/null 2>&1 && ok ||
    bad "png --view overview with a layer glob"
is_png "$tmp/glob.png"
"$bin" png "$t" --tensor 'encoder.layers.*.self_attn.weights' -o "$tmp/glob2.png" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && [ ! -e "$tmp/glob2.png" ] && ok || bad "a glob for one heatmap is not refused"

# today's blocks, on real Hugging Face folders: the RoPE view of q_rot and k_rot (drawn from the
# config, checked against the trace's own turning; GPT-NeoX turns 4 of 16 dims), the RMSNorm's
# statistics, and the query heads grouped by the key/value head they read (llama: 4 heads, 2 kv)
hf=tests/ref/hf
for m in llama gpt_neox; do
    "$bin" run --load $hf/$m --ids $hf/$m/ids.npy --trace "$tmp/$m.tstrace" >/dev/null 2>&1 || bad "a $m trace"
done
# drawn LOG TEXT: the text log holds TEXT
drawn() { grep -qF -- "$2" "$1" && ok || bad "no '$2' drawn in $1"; }
for k in q_rot k_rot; do
    rm -f "$tmp/log"
    TSCOPE_TEXT_LOG="$tmp/log" expect 0 "llama $k" -- "$bin" png "$tmp/llama.tstrace" --tensor decoder.layers.1.self_attn.$k -o "$tmp/rope.png"
    case $out in *"view rope"*) ok ;; *) bad "auto on $k: $out" ;; esac
    drawn "$tmp/log" "pair 1 (dims 1, 9): 0.316 rad/position" # 10000^(-2/16), rotate-half
    drawn "$tmp/log" "Checked on this trace"
done
rm -f "$tmp/log"
TSCOPE_TEXT_LOG="$tmp/log" expect 0 "gpt_neox partial rotary" -- "$bin" png "$tmp/gpt_neox.tstrace" --tensor decoder.layers.0.self_attn.q_rot -o "$tmp/rope2.png"
drawn "$tmp/log" "pair 1 (dims 1, 3): 0.01 rad/position" # r = 4 of 16 dims: 10000^(-2/4)
drawn "$tmp/log" "dims 4–15: not rotated"
drawn "$tmp/log" "Checked on this trace"
expect 0 "--view rope on q" -- "$bin" png "$tmp/gpt_neox.tstrace" --tensor decoder.layers.0.self_attn.q --view rope -o "$tmp/rope3.png"
expect 0 "q_rot as a tensor" -- "$bin" png "$tmp/gpt_neox.tstrace" --tensor decoder.layers.0.self_attn.q_rot --view heatmap -o "$tmp/qrot.png"
expect 2 "--view rope without RoPE" -- "$bin" png "$t" --tensor encoder.layers.0.self_attn.q --view rope -o "$tmp/x.png"
case $err in *"does not use RoPE"*) ok ;; *) bad "--view rope on a sinusoid model: $err" ;; esac
rm -f "$tmp/log"
TSCOPE_TEXT_LOG="$tmp/log" expect 0 "RMSNorm statistics" -- "$bin" png "$tmp/llama.tstrace" --tensor decoder.layers.0.norm2.out -o "$tmp/rms.png"
drawn "$tmp/log" "RMSNorm over d_model = 64"
drawn "$tmp/log" "RMS of each token"
rm -f "$tmp/log"
TSCOPE_TEXT_LOG="$tmp/log" expect 0 "grouped-query heads" -- "$bin" png "$tmp/llama.tstrace" --tensor decoder.layers.0.self_attn.weights -o "$tmp/gqa.png"
drawn "$tmp/log" "kv 0 · heads 0, 1"
drawn "$tmp/log" "kv 1 · heads 2, 3"
rm -f "$tmp/log"
TSCOPE_TEXT_LOG="$tmp/log" expect 0 "a shared key head" -- "$bin" png "$tmp/llama.tstrace" --tensor decoder.layers.0.self_attn.k --head 1 -o "$tmp/k.png"
drawn "$tmp/log" "kv head 1 of 2, read by query heads 2 and 3"

# --dims: the positional encoding's curves of the dims asked for, refused
# where no curve is drawn or the dim is not the step's
rm -f "$tmp/log"
TSCOPE_TEXT_LOG="$tmp/log" expect 0 "--dims" -- "$bin" png "$t" --tensor embed.pe --view curves --dims 0,1,10,11 -o "$tmp/dims.png"
drawn "$tmp/log" "dim 10 · sin"
drawn "$tmp/log" "dim 11 · cos"
grep -qF "dim 2 · sin" "$tmp/log" && bad "--dims 0,1,10,11 still draws dim 2" || ok
expect 2 "--dims past d_model" -- "$bin" png "$t" --tensor embed.pe --view curves --dims 0,16 -o "$tmp/x.png"
has "$err" "dim 16: embed.pe has dims 0 to 15" "--dims 16 of 16 dims"
expect 2 "--dims on a heatmap" -- "$bin" png "$t" --tensor embed.pe --view heatmap --dims 0,1 -o "$tmp/x.png"
has "$err" "--dims 0,1 picks the curves" "--dims on a heatmap"
expect 2 "--dims of words" -- "$bin" png "$t" --tensor embed.pe --dims a,b -o "$tmp/x.png"

# --compare B: the same step of an edited run, named by its edit; a map
# beside A's on one colour scale, curves on one pair of axes
"$bin" run --preset tiny --ablate encoder.layers.0.self_attn.head0 --trace "$tmp/edited.tstrace" --level values >/dev/null 2>&1 ||
    bad "an edited tiny trace"
rm -f "$tmp/log"
TSCOPE_TEXT_LOG="$tmp/log" expect 0 "--compare, a heatmap" -- "$bin" png "$t" --compare "$tmp/edited.tstrace" \
    --tensor encoder.layers.0.self_attn.values --view heatmap --head 0 -o "$tmp/cmp.png"
drawn "$tmp/log" "tiny.tstrace: as computed, no edit"
drawn "$tmp/log" "edited.tstrace: encoder.layers.0.self_attn.head0 zeroed"
single=$(TSCOPE_CLIPS= "$bin" png "$t" --tensor encoder.layers.0.self_attn.values --view heatmap --head 0 -o "$tmp/one.png" | sed -n 's/.*(\([0-9]*\) x .*/\1/p')
pair=$(sed -n 's/.*(\([0-9]*\) x .*/\1/p' <<<"$out")
[ -n "$single" ] && [ -n "$pair" ] && [ "$pair" -gt $((single * 3 / 2)) ] && ok || bad "--compare is not two maps side by side ($pair vs $single pixels wide)"
rm -f "$tmp/log"
ind=(--load assets/induction-2l.safetensors --text abcdefghabcdefgh --level values)
"$bin" run "${ind[@]}" --trace "$tmp/ind.tstrace" >/dev/null 2>&1 &&
    "$bin" run "${ind[@]}" --ablate decoder.layers.1.self_attn.head1 --trace "$tmp/ind-ko.tstrace" >/dev/null 2>&1 ||
    bad "two runs of the induction model"
TSCOPE_TEXT_LOG="$tmp/log" expect 0 "--compare, curves" -- "$bin" png "$tmp/ind.tstrace" --compare "$tmp/ind-ko.tstrace" --tensor loss.next -o "$tmp/cmpc.png"
drawn "$tmp/log" "two runs on one pair of axes"
drawn "$tmp/log" "ind-ko.tstrace: decoder.layers.1.self_attn.head1 zeroed"
expect 2 "--compare of a view with neither" -- "$bin" png "$t" --compare "$tmp/edited.tstrace" --tensor embed.pe -o "$tmp/x.png"
expect 2 "--compare with --highlight" -- "$bin" png "$t" --compare "$tmp/edited.tstrace" --tensor encoder.layers.0.self_attn.weights --head 0 --highlight 1,1 -o "$tmp/x.png"
expect 2 "--compare with a missing trace" -- "$bin" png "$t" --compare "$tmp/nowhere.tstrace" --tensor embed.pe -o "$tmp/x.png"
has "$err" "--compare $tmp/nowhere.tstrace" "a missing --compare trace"

# the sweeps' figures for a slide: --title, --caption, --projector; the
# checkpoint named by its file, not its path
rm -f "$tmp/log"
TSCOPE_TEXT_LOG="$tmp/log" expect 0 "ablate --projector" -- "$bin" ablate --load "$PWD/assets/induction-2l.safetensors" \
    --text abcdefghabcdefgh --projector --title "Which part matters" --caption "Each cell: the rise in loss." -o "$tmp/abl.png"
size=$(png_size "$tmp/abl.png")
[ "${size%x*}" -le 1920 ] && [ "${size#*x}" -le 1080 ] && [ "${size%x*}" -ge 1600 ] && ok || bad "ablate --projector is $size"
drawn "$tmp/log" "Which part matters"
drawn "$tmp/log" "Each cell: the rise in loss."
grep -qF "$PWD" "$tmp/log" && bad "ablate's figure prints an absolute path: $(grep -F "$PWD" "$tmp/log")" || ok
drawn "$tmp/log" "induction-2l.safetensors"
expect 2 "ablate --title with no figure" -- "$bin" ablate --load assets/induction-2l.safetensors --text abcdabcd --npz "$tmp/a.npz" --title T
has "$err" "set the figure, and none is drawn" "ablate --title with no figure"
expect 0 "attribute --projector --title --caption" -- "$bin" attribute --load assets/kjv-char.safetensors --text "And God sa" \
    --projector --title "Who wrote the i" --caption "Each bar: one part's share." -o "$tmp/attr.png"
size=$(png_size "$tmp/attr.png")
[ "${size%x*}" -le 1920 ] && [ "${size#*x}" -le 1080 ] && ok || bad "attribute --projector is $size"
expect 0 "patch --title --caption" -- "$bin" patch --load assets/induction-2l.safetensors --clean abcdabcd --corrupt abcdabce \
    --answer d --title "Where the answer lives" --caption "Restored fraction." -o "$tmp/patch.png"

# the next-token bars: a blank's word beside its glyph, the glyph by its bar
"$bin" run --load assets/kjv-char.safetensors --text "In the beginning" --trace "$tmp/kjv.tstrace" --level values >/dev/null 2>&1
rm -f "$tmp/log"
TSCOPE_TEXT_LOG="$tmp/log" expect 0 "next-token bars" -- "$bin" png "$tmp/kjv.tstrace" --tensor probs --position 1 -o "$tmp/bars.png"
drawn "$tmp/log" "space ␣"
# a slide of a tensor: its statistics' names and values apart at 1.75 times the text
for k in logits decoder.layers.0.self_attn.values; do
    expect 0 "$k --projector, every text whole" -- "$bin" png "$tmp/kjv.tstrace" --tensor $k --projector -o "$tmp/slide.png"
done

# A planted clip: a title too long for its figure is shortened with "…"; the
# figure is refused under tests, written with a warning for users.
long="EDITED: head 0 zeroed; head 1 zeroed; head 2 zeroed; head 3 zeroed; and a great deal more said in a title than fits"
long="$long, $long, $long, $long, $long" # more than the six lines a title wraps onto, 400 points wide
expect 2 "a title cut short, under tests" -- "$bin" png "$t" --tensor $attn --head 0 --view heatmap --width 400 --title "$long" -o "$tmp/cut.png"
has "$err" "not drawn whole: shortened to fit: \"EDITED: head 0 zeroed" "a cut title"
[ -e "$tmp/cut.png" ] && bad "the refused figure was written" || ok
TSCOPE_CLIPS= expect 0 "a title cut short, for users" -- "$bin" png "$t" --tensor $attn --head 0 --view heatmap --width 400 --title "$long" -o "$tmp/cut.png"
has "$err" "warning: $tmp/cut.png: 1 text not drawn whole" "the warning for users"
[ -s "$tmp/cut.png" ] && ok || bad "the figure with a warning was not written"

finish
