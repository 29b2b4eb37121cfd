#!/usr/bin/env bash
# README.md's counts of the lessons, written from the lessons themselves, not
# typed: between <!-- count:NAME --> and <!-- /count --> README holds
#   lessons       the number of lessons/NN-name.md, in words ("Eighteen")
#   lessons-lc    the same in lower case ("eighteen")
#   steps         their steps (one page each on the site): ```tscope step blocks
#   site-mb       the size of `tscope site` of every lesson, in MB (only with --site)
#   scripts/readme-counts.sh            rewrite README.md's counts (site-mb kept)
#   scripts/readme-counts.sh --site BIN also build the site with BIN to measure site-mb
#   scripts/readme-counts.sh --check    exit 1, naming each, when a count is stale
# tests/readme_test.sh runs --check; `make readme-counts` rewrites them.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=write site_bin=
case ${1:-} in
--check) mode=check ;;
--site) site_bin=${2:?--site takes the tscope binary} ;;
"") ;;
*) echo "readme-counts: unknown argument '$1' (--check or --site BIN)" >&2; exit 2 ;;
esac

number_words="Zero One Two Three Four Five Six Seven Eight Nine Ten Eleven Twelve Thirteen Fourteen Fifteen Sixteen
    Seventeen Eighteen Nineteen Twenty Twenty-one Twenty-two Twenty-three Twenty-four Twenty-five Twenty-six
    Twenty-seven Twenty-eight Twenty-nine Thirty"
read -r -d '' -a words <<<"$number_words" || true # the words one an element (read ends at the input's end)
n=$(ls lessons/[0-9]*-*.md | wc -l)
[ "$n" -lt ${#words[@]} ] || { echo "readme-counts: $n lessons: add words for them" >&2; exit 2; }
steps=$(cat lessons/[0-9]*-*.md | grep -c '^```tscope step')
declare -A want=([lessons]=${words[$n]} [lessons-lc]=${words[$n],,} [steps]=$steps)
if [ -n "$site_bin" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    "$site_bin" site "$tmp/site" --quiet >/dev/null
    want[site-mb]=$(($(du -sk "$tmp/site" | cut -f1) / 1024))
fi

# the value README holds for NAME (the first place it is written)
held() { sed -n "s/.*<!-- count:$1 -->\([^<]*\)<!-- \/count -->.*/\1/p" README.md | head -1; }

stale=0
for name in "${!want[@]}"; do
    have=$(held "$name")
    if [ -z "$have" ]; then
        echo "readme-counts: README.md has no <!-- count:$name --> marker" >&2
        stale=1
    elif [ "$have" != "${want[$name]}" ]; then
        if [ $mode = check ]; then
            echo "README.md says $name is '$have'; the lessons make it '${want[$name]}' (run make readme-counts)" >&2
            stale=1
        else
            sed -i "s/<!-- count:$name -->[^<]*<!-- \/count -->/<!-- count:$name -->${want[$name]}<!-- \/count -->/g" README.md
            echo "readme-counts: $name $have -> ${want[$name]}"
        fi
    fi
done
# every lesson has its row in the tour's table ("| N Title | ...")
rows=$(grep -c '^| [0-9][0-9]* [A-Z]' README.md || true)
if [ "$rows" != "$n" ]; then
    echo "README.md's table of lessons has $rows rows for $n lessons" >&2
    stale=1
fi
exit $stale
