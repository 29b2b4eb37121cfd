#!/usr/bin/env bash
# The lessons on the web, in a real browser: `tscope site` writes lessons 2-4 and 13 (a masked head)
# (WEB_LESSONS overrides: "all", or a list as --lessons takes it), then
# tests/web/site_test.js opens every page in Debian's headless chromium
# through puppeteer-core (scripts/deps.sh web installs both): no console
# error, no request leaving the folder, relative links, text in the figures,
# arrow keys, Home and End, a heatmap cell's tooltip under the mouse, one
# printed page a step. Each lesson's first figure as the browser draws it is
# compared with the PNG export of the same figure (thumb.png) with the
# tolerance of the SVG/PDF figure test. Reports the site's size, build time
# and page load times (budgets: 40 MB and a minute for every lesson, 300 ms a
# page; scripts/site-budget.sh measures the whole site). Bad requests: one line, exit 2.
. "$(dirname "$0")/lib.sh"
export TSCOPE_CACHE="$tmp/cache"

TOL=64      # as tests/figure_test.sh: a pixel differs when a channel is off by more than this
SHOT_MAX=2.0 # percent of pixels that may differ, browser screenshot against PNG (figure_test's SVG_MAX)

if [ ! -d tests/web/node_modules/puppeteer-core ] || [ ! -x /usr/bin/chromium ]; then
    echo "FAIL: the browser tests need chromium and puppeteer-core: run scripts/deps.sh web"
    echo "0 passed, 1 failed"
    exit 1
fi

# and a lesson of hostile Markdown: raw HTML, a link off the site, formulas cut short or nested deep
mkdir -p "$tmp/own"
cat >"$tmp/own/90-hostile.md" <<'MD'
# Hostile <b>narration</b> & "quotes"

<script>alert("raw HTML")</script> An intro with [a link](https://example.com/x) and $x_$, $^{$ and $√$.

```tscope setup
trace: assets/induction-2l.tstrace
```

```tscope step
tensor: decoder.layers.0.self_attn.weights
head: 0
step: 0
```

## Deep $a^{b^{c^{d^{e^{f^{g^{h^{i^{j^{k^{l^{m^{n^{o^{p^{q^{r^{s}}}}}}}}}}}}}}}}}}$

$$√(√(√(x_{1_{2_{3}}})$$ and $<tag>$ and $&amp;$ and `<code>`.

```tscope step
tensor: decoder.layers.0.self_attn.weights
head: 1
step: 0
```

No heading, a table: | a | b |
MD
lessons=${WEB_LESSONS:-2,3,4,13}
args=()
[ "$lessons" = all ] || args=(--lessons "$lessons,$tmp/own/90-hostile.md")
start=$(date +%s.%N)
# every figure's text whole (render.h, TSCOPE_CLIPS): a label cut at the figure's edge fails the build
expect 0 "tscope site" -- env TSCOPE_CLIPS=error "$bin" site "$tmp/site" "${args[@]}" --quiet
secs=$(echo "$start $(date +%s.%N)" | awk '{ printf "%.1f", $2 - $1 }')
kb=$(du -sk "$tmp/site" | cut -f1)
echo "site of lessons $lessons: $(find "$tmp/site" -name 'step*.html' | wc -l) pages, $((kb / 1024)).$(((kb % 1024) * 10 / 1024)) MB, built in $secs s"
[ -f "$tmp/site/index.html" ] && ok || bad "no index.html"
leftover=$(find "$tmp/site" -name '.*' -type f | wc -l)
[ "$leftover" = 0 ] && ok || bad "$leftover temporary files left in the site"

# browser SCRIPT ARGS...: run a node test, show its lines, add its counts
browser() {
    local script=$1 rc p f
    shift
    node "tests/web/$script" "$@" >"$tmp/node.log" 2>&1
    rc=$?
    grep -v '^[0-9]* passed, [0-9]* failed$' "$tmp/node.log"
    p=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$tmp/node.log" | tail -1)
    f=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$tmp/node.log" | tail -1)
    passed=$((passed + ${p:-0})) failed=$((failed + ${f:-0}))
    [ "$rc" = 0 ] || [ "${f:-0}" != 0 ] || bad "$script exited $rc"
}
browser site_test.js "$tmp/site" "$tmp/shots"

# the live page (tscope's C in WebAssembly, `make wasm`) against native run, from disk and from a server
if [ -f "$tmp/site/tscope-wasm.js" ]; then
    ok
    live_text='vQxjZkWmBpYfHgTqLzNcJdRsKwohFbGyvQxjZkWm'
    tests/web/native-probs.sh "$bin" assets/induction-2l.safetensors "$live_text" 1 0 "$tmp/live-ref.json" && ok ||
        bad "no native probabilities for the live page"
    browser live_test.js "$tmp/site" "$tmp/live-ref.json" "$tmp/live.png"
else
    bad "the site has no live page: build/wasm/tscope-wasm.js is missing (make wasm)"
fi

# the browser's drawing of each first figure against the PNG of the same figure
for d in "$tmp/site"/*/; do
    name=$(basename "$d")
    shot=$tmp/shots/$name.png
    [ -f "$shot" ] || { bad "$name: no screenshot of its first figure"; continue; }
    size=$(png_size "$d/thumb.png")
    [ "$(png_size "$shot")" = "$size" ] || { bad "$name: screenshot $(png_size "$shot"), PNG $size"; continue; }
    n=$("$pngtool" diff "$shot" "$d/thumb.png" "$size+0+0" $TOL 2>/dev/null) || n=999999999
    pct=$(echo "$n ${size%x*} ${size#*x}" | awk '{ printf "%.2f", 100 * $1 / ($2 * $3) }')
    echo "$name: the browser's first figure differs from the PNG in $pct% of pixels (at most $SHOT_MAX%)"
    awk -v p="$pct" -v m="$SHOT_MAX" 'BEGIN { exit !(p <= m) }' && ok || bad "$name: browser figure differs in $pct% of pixels"
done
# the comparison can fail: another lesson's figure is far off
set -- "$tmp/site"/*/
if [ $# -ge 2 ]; then
    a=$(basename "$1") b=$(basename "$2")
    size=$(png_size "$tmp/site/$a/thumb.png")
    n=$("$pngtool" diff "$tmp/shots/$a.png" "$tmp/site/$b/thumb.png" "$size+0+0" $TOL 2>/dev/null) || n=999999999
    pct=$(echo "$n ${size%x*} ${size#*x}" | awk '{ printf "%.2f", 100 * $1 / ($2 * $3) }')
    awk -v p="$pct" 'BEGIN { exit !(p > 4) }' && ok || bad "another lesson's figure differs in only $pct%: the comparison cannot fail"
fi

# the hostile lesson: its HTML shown as text (its link to a web page stays a link to read, never loaded), its formulas well formed
h=$tmp/site/90-hostile
if [ -d "$h" ]; then
    grep -q '<script>alert' "$h"/*.html && bad "a lesson's raw <script> reached the page" || ok
    grep -q '&lt;script&gt;alert' "$h/step01.html" && ok || bad "a lesson's raw HTML is not shown as text"
    grep -q 'Hostile &lt;b&gt;narration&lt;/b&gt; &amp; &quot;quotes&quot;' "$h/step01.html" && ok || bad "the lesson's title is not escaped"
    n_open=$(cat "$h"/*.html | grep -o '<math' | wc -l) n_close=$(cat "$h"/*.html | grep -o '</math>' | wc -l)
    [ "$n_open" -ge 5 ] && [ "$n_open" = "$n_close" ] && ok || bad "the hostile math: $n_open <math> for $n_close </math>"
    n_open=$(grep -o '<msqrt>' "$h/step01.html" | wc -l) n_close=$(grep -o '</msqrt>' "$h/step01.html" | wc -l)
    [ "$n_open" -ge 3 ] && [ "$n_open" = "$n_close" ] && ok || bad "the hostile roots: $n_open <msqrt> for $n_close </msqrt>"
else
    bad "no pages for the hostile lesson"
fi

# a teacher's own title and footer, as text, on the index and every page
expect 0 "site --title --footer" -- "$bin" site "$tmp/titled" --lessons 2 --title 'Physics 101 <b>' --footer 'Room 4 & online' --quiet
grep -q '<h1>Physics 101 &lt;b&gt;</h1>' "$tmp/titled/index.html" && ok || bad "--title is not the index's heading"
grep -q '<footer>Room 4 &amp; online</footer>' "$tmp/titled/02-positional-encoding/step01.html" && ok ||
    bad "--footer is not on a lesson's page"
grep -q 'class="home" href="../index.html">Physics 101 &lt;b&gt;<' "$tmp/titled/02-positional-encoding/step01.html" && ok ||
    bad "--title is not a page's link home"

# without the wasm build: a live.html that says how to make it, and a line on stderr
expect 0 "site without the wasm build" -- env TSCOPE_WASM="$tmp/no-such-build.js" "$bin" site "$tmp/no-wasm" --lessons 2 --quiet
case $err in *"make wasm"*) ok ;; *) bad "site without the wasm build said: $err" ;; esac
grep -q 'make wasm' "$tmp/no-wasm/live.html" && [ ! -e "$tmp/no-wasm/live.js" ] && ok ||
    bad "site without the wasm build: its live.html does not say how to make it"

# a teacher's folder: site finds its lessons by number as `tscope lesson` does
mkdir -p "$tmp/teacher"
cat >"$tmp/teacher/91-mine.md" <<'MD'
# My own lesson

An introduction.

```tscope setup
load: assets/induction-2l.safetensors
text: abcabc
```

```tscope step
tensor: decoder.layers.1.self_attn.weights
head: 1
```
MD
cd "$tmp/teacher" && "$bin" site "$tmp/teacher-site" --lessons 91 --quiet >"$tmp/teacher.out" 2>"$tmp/teacher.err"
rc=$?
cd "$OLDPWD" || exit 2
[ "$rc" = 0 ] && [ -f "$tmp/teacher-site/91-mine/step01.html" ] && ok ||
    bad "site --lessons 91 in the lesson's folder: exit $rc, $(cat "$tmp/teacher.err")"

# the figures' labels are not letter-spaced: each <text> gives the x of its run only (a position
# per character spread the letters apart once the figure was scaled)
spaced=$(cat "$tmp/site"/*/step*.html | grep -c '<text[^>]* x="[-0-9.]* [-0-9.]')
[ "$spaced" = 0 ] && ok || bad "$spaced inline SVG labels place each character by itself"

# the page's narration: md4c's HTML, math as MathML
grep -q '<math' "$tmp/site/03-attention/step01.html" && ok || bad "lesson 3's first page has no MathML"
grep -q '<msqrt>' "$tmp/site/03-attention/step01.html" && ok || bad "lesson 3's √d_k is not a MathML root"
grep -q '<code>' "$tmp/site/03-attention/step01.html" && ok || bad "lesson 3's inline code is not <code>"

# tscope html on the Bible GPT's training trace (31 snapshots): tree, search, slider, heads
expect 0 "tscope html" -- "$bin" html assets/induction-2l.tstrace -o "$tmp/html"
echo "$out"
case $out in *"527 steps"*"index.html"*) ok ;; *) bad "tscope html said: $out" ;; esac
[ "$(find "$tmp/html/s" -name '*.svg' | wc -l)" -ge 527 ] && ok || bad "fewer figures than records in $tmp/html/s"
# at most 15 MB: a heatmap's cells are data its figure's script reads, not an element each
bytes=$(find "$tmp/html" -type f -printf '%s\n' | awk '{ n += $1 } END { print n + 0 }')
echo "tscope html: $(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }') MB in its files for a $(du -sh assets/induction-2l.tstrace | cut -f1) trace (at most 15 MB)"
[ "$bytes" -le 15000000 ] && ok || bad "tscope html of the induction trace is $bytes bytes, more than 15 MB"
# what the trace holds at head 2's row 40, column 9 in the second-last snapshot, for the hover
"$bin" export assets/induction-2l.tstrace --npz "$tmp/attn.npz" --only decoder.layers.1.self_attn.weights >/dev/null
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3 # Debian's, with python3-numpy (scripts/deps.sh)
want=$("$py" -c '
import sys, numpy as np
z = np.load(sys.argv[1])
names = sorted(z.files, key=lambda n: int(n.split("@")[1]) if "@" in n else 0)
a = z[names[-2]]
print(repr(float(a.reshape((-1,) + a.shape[-3:])[0, 2, 40, 9])))' "$tmp/attn.npz") || bad "no value of row 40, column 9 from the trace"
browser html_test.js "$tmp/html" $want

# bad requests
expect 2 "html without -o" -- "$bin" html assets/induction-2l.tstrace
expect 2 "html -o an empty name" -- "$bin" html assets/induction-2l.tstrace -o ""
expect 2 "site into an empty name" -- "$bin" site "" --quiet
expect 2 "html of a missing trace" -- "$bin" html "$tmp/missing.tstrace" -o "$tmp/h2"
head -c 3000 assets/induction-2l.tstrace >"$tmp/cut.tstrace"
"$bin" html "$tmp/cut.tstrace" -o "$tmp/h3" >/dev/null 2>"$tmp/cut.err"
rc=$?
{ [ "$rc" = 2 ] || [ "$rc" = 0 ]; } && [ "$(wc -l <"$tmp/cut.err")" -le 2 ] && ok || bad "a cut trace: exit $rc, $(cat "$tmp/cut.err")"
printf 'not a trace at all' >"$tmp/junk.tstrace"
expect 2 "html of a file that is not a trace" -- "$bin" html "$tmp/junk.tstrace" -o "$tmp/h4"
[ -e "$tmp/h4/index.html" ] && bad "html of junk wrote a page" || ok
# the same hostile inputs through the sanitized binary (run-tests.sh sets TSCOPE_ASAN): no report
if [ -n "${TSCOPE_ASAN:-}" ]; then
    export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp ASAN_OPTIONS=detect_leaks=1
    expect 0 "asan: site of the hostile lesson" -- "$TSCOPE_ASAN" site "$tmp/asan-site" --lessons "$tmp/own/90-hostile.md" --quiet
    case $err in *ERROR:*Sanitizer* | *"runtime error"*) bad "asan: site: $err" ;; *) ok ;; esac
    "$TSCOPE_ASAN" html "$tmp/cut.tstrace" -o "$tmp/asan-cut" >/dev/null 2>"$tmp/asan.err"
    grep -qE 'ERROR: .*Sanitizer|runtime error' "$tmp/asan.err" && bad "asan: html of a cut trace: $(cat "$tmp/asan.err")" || ok
    expect 2 "asan: html of junk" -- "$TSCOPE_ASAN" html "$tmp/junk.tstrace" -o "$tmp/asan-junk"
    case $err in *ERROR:*Sanitizer* | *"runtime error"*) bad "asan: html of junk: $err" ;; *) ok ;; esac
fi
expect 2 "site without a folder" -- "$bin" site
expect 2 "an unknown lesson" -- "$bin" site "$tmp/x" --lessons 99
case $err in *99*) ok ;; *) bad "an unknown lesson: $err" ;; esac
expect 2 "site into a file" -- "$bin" site /dev/null/x --quiet
finish
