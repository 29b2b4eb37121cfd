#!/usr/bin/env bash
# `tscope tokenize`: the reference's ids for the whole fixture text
# (tests/ref/bpe/), stdin and files, --decode back to the same bytes, --show
# labels, --tokenizer with either pair of file names, $TSCOPE_ASSETS, and one
# line on stderr with exit 2 for each kind of bad input. Runs ./tscope (or $TSCOPE).
# The other tokenizers of --tokenizer DIR: tests/hftok_test.sh.
. "$(dirname "$0")/lib.sh"

# same NAME FILE WANT: FILE holds exactly WANT
same() {
    if [ "$(cat "$2")" = "$3" ]; then ok; else bad "$1: got '$(cat "$2")', want '$3'"; fi
}

# refuses NAME MESSAGE-PART CMD...: exit 2, nothing on stdout, one line on stderr naming the problem
refuses() {
    local name=$1 part=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    local rc=$?
    if [ $rc != 2 ]; then
        bad "$name: exit $rc, want 2 (stderr: $(head -c 300 "$tmp/err"))"
    elif [ -s "$tmp/out" ]; then
        bad "$name: wrote to stdout: $(head -c 200 "$tmp/out")"
    elif ! grep -q -- "$part" "$tmp/err"; then
        bad "$name: stderr does not say '$part': $(cat "$tmp/err")"
    elif [ "$(grep -c '' "$tmp/err")" != 1 ] && ! grep -q '^usage' "$tmp/err"; then
        bad "$name: more than one line on stderr: $(cat "$tmp/err")"
    else
        ok
    fi
}

# 1. the fixture text, all of it, gives the reference's ids and decodes back
if "$bin" tokenize tests/ref/bpe/text.txt >"$tmp/ids" 2>"$tmp/err"; then
    if cmp -s "$tmp/ids" tests/ref/bpe/ids.txt; then
        ok
    else
        n=$(cmp "$tmp/ids" tests/ref/bpe/ids.txt | sed -n 's/.*line \([0-9]*\).*/\1/p')
        bad "tokenize text.txt differs from ids.txt at line $n: $(sed -n "${n}p" tests/ref/bpe/text.txt | head -c 200)"
    fi
    "$bin" tokenize --decode "$tmp/ids" >"$tmp/back" 2>"$tmp/err"
    if cmp -s "$tmp/back" tests/ref/bpe/text.txt; then ok; else bad "--decode of text.txt's ids is not text.txt"; fi
else
    bad "tokenize text.txt failed: $(cat "$tmp/err")"
fi

# 2. stdin, '-', a last line without '\n', empty lines, empty input
printf 'Hello world\n' | "$bin" tokenize >"$tmp/o" 2>&1
same "stdin" "$tmp/o" "15496 995"
printf 'Hello world\n' | "$bin" tokenize - >"$tmp/o" 2>&1
same "FILE -" "$tmp/o" "15496 995"
printf 'a\n\nb' | "$bin" tokenize >"$tmp/o" 2>&1
same "no final newline" "$tmp/o" "$(printf '64\n\n65')"
if [ "$(printf 'a\n\nb' | "$bin" tokenize | wc -l)" = 3 ]; then ok; else bad "three lines in, not three lines out"; fi
: >"$tmp/empty"
"$bin" tokenize "$tmp/empty" >"$tmp/o" 2>&1
if [ -e "$tmp/o" ] && [ ! -s "$tmp/o" ]; then ok; else bad "empty input: output '$(cat "$tmp/o")'"; fi

# 3. bytes come back exactly: CRLF, tabs, NBSP, emoji, a line of spaces
printf 'one\r\ntwo\t\xc2\xa0three \xf0\x9f\x98\x80\r\n   \n' >"$tmp/crlf"
"$bin" tokenize "$tmp/crlf" | "$bin" tokenize --decode >"$tmp/crlf.back" 2>&1
if cmp -s "$tmp/crlf" "$tmp/crlf.back"; then ok; else bad "CRLF text does not come back byte for byte"; fi
# ill-formed UTF-8 becomes U+FFFD, as in the reference
printf 'a\xffb\n' | "$bin" tokenize >"$tmp/o" 2>&1
same "ill-formed UTF-8" "$tmp/o" "64 4210 65"

# 4. --show labels, from text and from ids
printf "Hello world, it's\n\tdone\n" | "$bin" tokenize --show >"$tmp/o" 2>&1
same "--show" "$tmp/o" "$(printf "Hello ␣world , ␣it 's\n⇥ done")"
printf '15496 995\n' | "$bin" tokenize --decode --show >"$tmp/o" 2>&1
same "--decode --show" "$tmp/o" "Hello ␣world"

# 5. --tokenizer with Hugging Face's names, and $TSCOPE_ASSETS
mkdir -p "$tmp/hf" "$tmp/assets/gpt2"
cp assets/gpt2/encoder.json "$tmp/hf/vocab.json"
cp assets/gpt2/vocab.bpe "$tmp/hf/merges.txt"
cp assets/gpt2/encoder.json assets/gpt2/vocab.bpe "$tmp/assets/gpt2/"
echo "The quick brown fox" | "$bin" tokenize --tokenizer "$tmp/hf" >"$tmp/o" 2>&1
same "--tokenizer vocab.json+merges.txt" "$tmp/o" "464 2068 7586 21831"
echo "The quick brown fox" | TSCOPE_ASSETS="$tmp/assets" "$bin" tokenize >"$tmp/o" 2>&1
same "TSCOPE_ASSETS" "$tmp/o" "464 2068 7586 21831"

# 6. --time reports on stderr and leaves stdout alone
echo "Hello world" | "$bin" tokenize --time >"$tmp/o" 2>"$tmp/err"
if [ "$(cat "$tmp/o")" = "15496 995" ] && grep -q 'MB/s' "$tmp/err"; then ok; else bad "--time: $(cat "$tmp/o" "$tmp/err")"; fi

# 7. bad inputs: one line on stderr, exit 2
refuses "missing dir" "nowhere: no such directory" "$bin" tokenize --tokenizer "$tmp/nowhere" "$tmp/empty"
refuses "empty TSCOPE_ASSETS" "gpt2: no such directory" env TSCOPE_ASSETS="$tmp/hf" "$bin" tokenize "$tmp/empty"
mkdir -p "$tmp/badjson" "$tmp/badbpe" "$tmp/nobpe"
printf '{"a": 0,' >"$tmp/badjson/encoder.json"
cp assets/gpt2/vocab.bpe "$tmp/badjson/"
refuses "malformed json" "not valid JSON" "$bin" tokenize --tokenizer "$tmp/badjson" "$tmp/empty"
cp assets/gpt2/encoder.json "$tmp/badbpe/"
printf '#version: 0.2\n\xc4\xa0 t\n\xc4\xa0 a b\n' >"$tmp/badbpe/vocab.bpe"
refuses "malformed bpe" "line 3 has 3 fields" "$bin" tokenize --tokenizer "$tmp/badbpe" "$tmp/empty"
printf '#version: 0.2\nqq zzzzzz\n' >"$tmp/badbpe/vocab.bpe"
refuses "merge outside the vocabulary" "not in the vocabulary" "$bin" tokenize --tokenizer "$tmp/badbpe" "$tmp/empty"
cp assets/gpt2/encoder.json "$tmp/nobpe/"
refuses "no merges file" "no vocab.bpe or merges.txt" "$bin" tokenize --tokenizer "$tmp/nobpe" "$tmp/empty"
refuses "missing FILE" "cannot open" "$bin" tokenize "$tmp/no-such-file.txt"
refuses "FILE is a directory" "cannot read" "$bin" tokenize "$tmp"
printf '15496 abc\n' >"$tmp/ids.bad"
refuses "--decode of a word" "line 1: 'abc' is not a token id" "$bin" tokenize --decode "$tmp/ids.bad"
printf '1\n15496 50257\n' >"$tmp/ids.bad"
refuses "--decode of id 50257" "line 2: id 50257 is outside the vocabulary (0..50256)" "$bin" tokenize --decode "$tmp/ids.bad"
printf -- '-1\n' >"$tmp/ids.bad"
refuses "--decode of -1" "'-1' is not a token id" "$bin" tokenize --decode "$tmp/ids.bad"
printf '99999999999999999999\n' >"$tmp/ids.bad"
refuses "--decode of a huge id" "outside the vocabulary" "$bin" tokenize --decode "$tmp/ids.bad"
refuses "unknown flag" "--bogus" "$bin" tokenize --bogus
refuses "two files" "" "$bin" tokenize "$tmp/empty" "$tmp/empty"

finish
