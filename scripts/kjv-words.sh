#!/usr/bin/env bash
# kjv-words.sh MODEL [CHARS]: how much of what a character model of the King James
# Bible writes is real KJV words. Five samples of CHARS characters (default 2000) at
# temperature 0.8 after "And God said" (seeds 1 to 5), cut into words (runs of
# letters, lower-cased); prints the share of those words that occur anywhere in the
# Bible's text (Debian's bible-kjv, `bible -f Gen1:1-Rev22:21`), and the count.
# Runs ./tscope (or $TSCOPE). Used for the table of assets/README.md.
set -eu
model=${1:?usage: scripts/kjv-words.sh MODEL [CHARS]}
chars=${2:-2000}
bin=${TSCOPE:-./tscope}
prompt="And God said"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v bible >/dev/null || { echo "kjv-words: no bible command (scripts/deps.sh train)" >&2; exit 2; }
bible -f Gen1:1-Rev22:21 | tr 'A-Z' 'a-z' | tr -cs 'a-z' '\n' | sort -u >"$tmp/kjv"
for seed in 1 2 3 4 5; do
    "$bin" generate --load "$model" --prompt "$prompt" -n "$chars" --temperature 0.8 --seed "$seed" --quiet |
        tail -c +$((${#prompt} + 1))
    echo
done | tr 'A-Z' 'a-z' | tr -cs 'a-z' '\n' | sed '/^$/d' >"$tmp/written"
awk 'NR == FNR { known[$0] = 1; next } { n++; if ($0 in known) k++ }
     END { if (n) printf "%.3f of %d words written are KJV words\n", k / n, n; else { print "no words written"; exit 1 } }' \
    "$tmp/kjv" "$tmp/written"
