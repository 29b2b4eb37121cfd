#!/usr/bin/env bash
# `tscope live` in a real X server (scripts/run-tests.sh runs this under
# xvfb-run): the Bible model types "And God sa", Tab twice appends the model's
# own "id"; the screenshot has the attention view and the next-token panel;
# picking another head and layer changes the view; the logit lens comes and goes; the reverse model's
# source and target fields decode one greedy step a Tab; a character the vocabulary
# lacks is said and the rest runs; bad words and no display are one line, exit 2.
#
#   TSCOPE=path/to/tscope (default ./tscope)
. "$(dirname "$0")/lib.sh"
W=1280 H=800
kjv=assets/kjv-char.safetensors

if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
    echo "no display: run under xvfb-run (scripts/run-tests.sh does)"
    echo "0 passed, 1 failed"
    exit 1
fi

# has WHAT NEEDLE: the last session's output holds NEEDLE.
has() { case "$out" in *"$2"*) ok ;; *) bad "$1: no '$2' in: $out" ;; esac; }

# live SCRIPT SHOT: run a scripted session, its stdout in $out, exit in $rc.
live() { out=$("$bin" live --load "$kjv" --width $W --height $H --script "$1" --screenshot "$2" 2>&1); rc=$?; }

live "type:And God sa tab tab" "$tmp/said.png"
[ "$rc" = 0 ] && ok || bad "live exit $rc: $out"
has "the model types 'id' after 'And God sa'" 'text "And God said"' "$out"
has "the view starts on layer 0's attention" "step decoder.layers.0.self_attn.weights" "$out"
[ "$(png_size "$tmp/said.png")" = "${W}x${H}" ] && ok || bad "screenshot size $(png_size "$tmp/said.png")"
# the attention view (centre) and the panel's bars (right) are pictures, not blanks
n=$(png_colors "$tmp/said.png" "600x600+300+130"); [ "$n" -gt 20 ] && ok || bad "attention view: $n colours"
n=$(png_colors "$tmp/said.png" "170x280+1040+140"); [ "$n" -gt 3 ] && ok || bad "next-token bars: $n colours"

live "type:And God sa tab tab head:2 pgdn" "$tmp/head.png"
has "pgdn moves to layer 1's attention" "step decoder.layers.1.self_attn.weights" "$out"
png_same "$tmp/said.png" "$tmp/head.png" "600x600+300+130" && bad "another head and layer drew the same view" || ok

# the logit lens (Ctrl+L, the script's "lens") comes on screen, and goes back to the step before
live "type:And God sa tab tab lens" "$tmp/lens.png"
has "the lens comes on screen" "step lens.layers.0" "$out"
has "the lens leaves the text alone" 'text "And God said"' "$out"
png_same "$tmp/said.png" "$tmp/lens.png" "600x400+300+130" && bad "the lens drew the attention view" || ok
live "type:And God sa tab tab lens lens" "$tmp/nolens.png"
has "a second lens goes back" "step decoder.layers.0.self_attn.weights" "$out"

live "type:Jesus wept\$ tab" "$tmp/bad.png"
[ "$rc" = 0 ] && ok || bad "an unknown character stopped the session: $out"
has "the unknown character is left out, the rest runs" 'text "Jesus wept$' "$out"

# lesson 3's live page (the fifth step): Enter, then the text is edited and the step recomputes
out=$("$bin" lesson 3 --width $W --height 720 --script "right right right right shot:$tmp/page.png enter shot:$tmp/live0.png backspace backspace backspace backspace a t e d" --screenshot "$tmp/lesson-live.png" 2>&1); rc=$?
[ "$rc" = 0 ] && ok || bad "lesson 3 live: exit $rc: $out"
png_same "$tmp/page.png" "$tmp/live0.png" "1200x600+40+60" && bad "Enter did not make the page live" || ok
png_same "$tmp/live0.png" "$tmp/lesson-live.png" "600x500+300+130" && bad "the edited text drew the same weights" || ok
out=$("$bin" lesson 3 --width $W --height 720 --script "right right right right enter esc" --screenshot "$tmp/back.png" 2>&1); rc=$?
png_same "$tmp/page.png" "$tmp/back.png" "1200x600+40+60" && ok || bad "Esc did not bring the page back"

# a long text keeps the grid's labels: thinned, each with its position
rm -f "$tmp/tlog"
out=$(TSCOPE_TEXT_LOG="$tmp/tlog" "$bin" live --load "$kjv" --width $W --height $H --script "type:abcdefghijabcdefghijabcdefghijabcdefghij" --screenshot "$tmp/long.png" 2>&1)
grep -q " 39 j$" "$tmp/tlog" && grep -q " 0 a$" "$tmp/tlog" && ok || bad "a 40-token grid lost its labels: $(grep -c '' "$tmp/tlog") texts drawn"
grep -q "every [0-9a-z]* labelled" "$tmp/tlog" && ok || bad "the grid does not say its labels are thinned"

# knocking heads out: the induction model's layer-1 heads, by name and by a click on the grid
ind=assets/induction-2l.safetensors
out=$("$bin" live --load "$ind" --width $W --height $H --script "type:qwertyuiopasdfqwertyuiopasdf knock:decoder.layers.1.self_attn.head0 knock:decoder.layers.1.self_attn.head1" --screenshot "$tmp/knock.png" 2>&1)
has "two induction heads out" '2 heads knocked out; largest change "q" 0.936 -> 0.0' "$out"
# the same two heads by the names a learner has: L.H, and the name the panel prints
out=$("$bin" live --load "$ind" --width $W --height $H --script "type:qwertyuiopasdfqwertyuiopasdf knock:1.0 knock:layers.1.self_attn.head1" --screenshot "$tmp/knock2.png" 2>&1)
has "two induction heads out, by L.H and by the panel's name" '2 heads knocked out; largest change "q" 0.936 -> 0.0' "$out"
out=$("$bin" live --load "$ind" --width $W --height $H --script "type:qwertyuiopasdfqwertyuiopasdf knock:1.0 knock:decoder.layers.1.self_attn.head0" --screenshot "$tmp/knock3.png" 2>&1)
case "$out" in *"knocked out"*) bad "knock:1.0 then its full name did not bring it back: $out" ;; *) ok ;; esac
out=$("$bin" live --load "$ind" --width $W --height $H --script "knock:3" --screenshot "$tmp/k.png" 2>&1) && bad "knock:3 was taken" || ok
has "knock:3 says what a head's name is" "knock:3: this model has no such head; give L.H" "$out"
case "$out" in *--ablate*) bad "knock:3 names a flag the learner never typed: $out" ;; *) ok ;; esac
out=$("$bin" live --load "$ind" --width $W --height $H --script "type:qwertyuiopasdfqwertyuiopasdf pgdn click:430,300" --screenshot "$tmp/click.png" 2>&1)
has "a click on head 0's grid knocks it out" "1 head knocked out" "$out"
png_same "$tmp/said.png" "$tmp/click.png" "300x260+960+440" && bad "the panel did not show the knock-out" || ok
out=$("$bin" live --load "$ind" --width $W --height $H --script "type:qwertyuiopasdfqwertyuiopasdf pgdn click:430,300 click:430,300" --screenshot "$tmp/back.png" 2>&1)
case "$out" in *"knocked out"*) bad "a second click did not bring the head back: $out" ;; *) ok ;; esac

"$bin" live --load "$kjv" --script "tab frobnicate" >"$tmp/o" 2>&1 && bad "a bad script word was accepted" || ok
[ "$(wc -l <"$tmp/o")" = 1 ] && grep -q "unknown word 'frobnicate'" "$tmp/o" && ok || bad "bad word: $(cat "$tmp/o")"
env -u DISPLAY -u WAYLAND_DISPLAY "$bin" live --load "$kjv" >"$tmp/o" 2>&1; rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <"$tmp/o")" = 1 ] && grep -q "no display" "$tmp/o" && ok || bad "no display: exit $rc: $(cat "$tmp/o")"
printf 'not a checkpoint\n' >"$tmp/junk.safetensors"
"$bin" live --load "$tmp/junk.safetensors" >"$tmp/o" 2>&1; rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <"$tmp/o")" = 1 ] && ok || bad "a file that is no checkpoint: exit $rc: $(cat "$tmp/o")"
head -c 300 assets/tiny-reverse.safetensors >"$tmp/cut.safetensors"
"$bin" live --load "$tmp/cut.safetensors" >"$tmp/o" 2>&1; rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <"$tmp/o")" = 1 ] && ok || bad "a cut checkpoint: exit $rc: $(cat "$tmp/o")"
"$bin" live --load "$kjv" --target "abc" >"$tmp/o" 2>&1; rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <"$tmp/o")" = 1 ] && grep -q -- "--target" "$tmp/o" && ok || bad "--target for a language model: exit $rc: $(cat "$tmp/o")"
"$bin" live --load "$kjv" --script "focus:target" >"$tmp/o" 2>&1; rc=$?
[ "$rc" = 2 ] && grep -q "one field" "$tmp/o" && ok || bad "focus:target for a language model: exit $rc: $(cat "$tmp/o")"

# an encoder-decoder: the reverse model writes the source backwards, one Tab a word
rev=assets/tiny-reverse.safetensors
src="the cat sat on a mat and it was"
out=$("$bin" live --load "$rev" --width $W --height $H --text "$src" --script "tab tab tab tab tab tab tab tab" --screenshot "$tmp/rev.png" 2>&1); rc=$?
[ "$rc" = 0 ] && ok || bad "live on the reverse model: exit $rc: $out"
has "eight greedy steps write the source backwards" 'target "was it and mat a on sat cat"' "$out"
has "the last position writes the first word" 'next token "the"' "$out"
has "the view starts on the last cross-attention" "step decoder.layers.1.cross_attn.weights" "$out"
n=$(png_colors "$tmp/rev.png" "500x500+300+170"); [ "$n" -gt 20 ] && ok || bad "cross-attention view: $n colours"
out=$("$bin" live --load "$rev" --width $W --height $H --text "$src" --script "tab tab tab tab tab tab tab tab tab" --screenshot "$tmp/rev9.png" 2>&1)
has "a ninth step has no position left" "positions are all read" "$out"
# a click on the source field gives it the keys; the target is left as it was
out=$("$bin" live --load "$rev" --width $W --height $H --text "$src" --script "tab click:300,60 type:x click:300,24 backspace backspace backspace type:cow" --screenshot "$tmp/rev2.png" 2>&1)
has "typing goes to the field clicked" 'source "the cat sat on a mat and it cow"; target "wasx"' "$out"

# every kind of pass (cached, full, lens, knock-out, an encoder-decoder's) under the sanitizer build
sanitized() { # LABEL ARGS...: a session of the sanitizer build ends well, nothing leaked
    local label=$1
    shift
    out=$(LD_PRELOAD="$(asan_preload "$TSCOPE_ASAN")" LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
        ASAN_OPTIONS=detect_leaks=1 "$TSCOPE_ASAN" live "$@" --screenshot "$tmp/asan.png" 2>&1)
    rc=$?
    [ "$rc" = 0 ] && ok || bad "sanitizer session ($label): exit $rc: $(printf '%s\n' "$out" | grep -m3 -E 'ERROR|SUMMARY|#[0-9]')"
}
if [ -n "${TSCOPE_ASAN:-}" ]; then
    sanitized "a language model" --load "$kjv" --text "And God sa" --script "tab find:decoder.layers.1.self_attn.masked tab \
knock:decoder.layers.0.self_attn.head1 tab lens tab lens backspace home type:x"
    sanitized "an encoder-decoder" --load "$rev" --text "$src q" --target "x" --script "tab \
knock:decoder.layers.1.cross_attn.head0 lens tab focus:source backspace lens"
fi

finish
