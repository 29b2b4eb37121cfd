#!/usr/bin/env bash
# The command line's contract: help, version, and one clear line plus exit 2
# for anything it does not know. Runs ./tscope (build it first).
. "$(dirname "$0")/lib.sh"

expect 0 "--help" -- "$bin" --help
case $out in *"usage: tscope COMMAND"*) ok ;; *) bad "--help shows no usage" ;; esac
# every listed command answers --help and `help CMD` with its own usage
commands=$(printf '%s\n' "$out" | sed -n '/^commands:/,/^$/p' | awk 'NR>1 && NF {print $1}')
for cmd in $commands; do
    expect 0 "$cmd --help" -- "$bin" "$cmd" --help
    case $out in *"usage: tscope $cmd"*) ok ;; *) bad "$cmd --help prints no usage line" ;; esac
    expect 0 "help $cmd" -- "$bin" help "$cmd"
    case $out in *"usage: tscope $cmd"*) ok ;; *) bad "help $cmd prints no usage line" ;; esac
    expect 2 "$cmd --no-such-flag" -- "$bin" "$cmd" --no-such-flag
    case $err in "tscope $cmd: unknown flag --no-such-flag"*) ok ;; *) bad "$cmd: unknown flag message: $err" ;; esac
    # one line, not the whole help burying it
    [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && ok || bad "$cmd: an unknown flag printed $(printf '%s\n' "$err" | wc -l) lines"
    expect 2 "$cmd -x" -- "$bin" "$cmd" -x
    [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && ok || bad "$cmd -x printed more than one line: $err"
done

expect 0 "--version" -- "$bin" --version
case $out in "tscope "[0-9]*) ok ;; *) bad "--version prints '$out'" ;; esac

expect 2 "unknown command" -- "$bin" nosuch
first=$(printf '%s\n' "$err" | head -1)
[ "$first" = "tscope: unknown command 'nosuch'" ] && ok || bad "unknown command line: $first"
case $err in *"usage: tscope COMMAND"*) ok ;; *) bad "unknown command: no usage on stderr" ;; esac
[ -z "$out" ] && ok || bad "unknown command wrote to stdout"

expect 2 "unknown top-level flag" -- "$bin" --frobnicate
expect 2 "help for an unknown command" -- "$bin" help nosuch
expect 2 "no command" -- "$bin"
nothing=$("$bin" --help | grep -ci "not implemented")
[ "$nothing" = 0 ] && ok || bad "--help mentions 'not implemented'"

finish
