#!/usr/bin/env bash
# The web site's budgets, measured: `tscope site` of every lesson (its
# setups' traces cached first, so the build is the site's own work) should
# take under a minute and 40 MB, and each page load under 300 ms in headless
# chromium (navigation start to the load event; tests/web/site_test.js opens
# every page and reports the median and the slowest); with `make wasm` built,
# the site carries the live page and both shipped models, and the live page's
# keystroke p95 is measured (tests/web/live_test.js). Reports; asserts nothing.
#   scripts/site-budget.sh [TSCOPE]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-./tscope}
scripts/deps.sh web
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cache=$tmp/cache
echo "site-budget: running every lesson's setups once (cached for the build below)"
"$bin" site "$tmp/warm" --cache "$cache" --quiet
rm -rf "$tmp/warm"
# bash's own clock: wall, user and system seconds of the build
TIMEFORMAT='%R %U %S'
t=$( { time "$bin" site "$tmp/site" --cache "$cache" --quiet >/dev/null; } 2>&1 )
secs=$(echo "$t" | awk '{ printf "%.1f", $1 }')
cpu=$(echo "$t" | awk '{ printf "%.1f", $2 + $3 }')
kb=$(du -sk "$tmp/site" | cut -f1)
pages=$(find "$tmp/site" -name 'step*.html' | wc -l)
echo "site-budget: $pages pages, $((kb / 1024)) MB (budget 40 MB), built in $secs s wall, $cpu s CPU (budget 60 s)"
node tests/web/site_test.js "$tmp/site" "$tmp/shots" | grep -E 'load times|passed'
# the live page's keystroke p95 in chromium (tests/web/live_test.js), beside native `tscope bench live`
if [ -f "$tmp/site/tscope-wasm.js" ]; then
    text='vQxjZkWmBpYfHgTqLzNcJdRsKwohFbGyvQxjZkWm'
    tests/web/native-probs.sh "$bin" assets/induction-2l.safetensors "$text" 1 0 "$tmp/live-ref.json"
    node tests/web/live_test.js "$tmp/site" "$tmp/live-ref.json" | grep -E 'p95|usable|passed'
else
    echo "site-budget: no live page to time (make wasm first)"
fi
