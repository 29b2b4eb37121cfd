#!/usr/bin/env bash
# Every program the tests, the scripts and the Makefile run comes from the
# stock machine (tests/stock-packages.txt) or from a package scripts/deps.sh
# installs: a test that starts calling a tool nothing installs fails here, on
# this machine, instead of on a fresh one. Also checks that the guard itself
# catches such a call (planted in a copy of a test).
#
# How: the command words of each shell line and Makefile recipe are taken
# (first word of each pipeline part, after assignments and keywords), less
# shell builtins, functions the scripts define and the project's own
# programs; each must be a file in /usr/bin, /bin, /usr/sbin or /sbin owned
# (dpkg -S) by an allowed package.
. "$(dirname "$0")/lib.sh"

stock=tests/stock-packages.txt
# every package deps.sh installs, in any of its groups
deps_packages() { scripts/deps.sh --list test web bench fuzz train cross clang; }

builtins=" alias bg bind break builtin caller case cd command compgen complete continue declare dirs disown do done
 echo elif else enable esac eval exec exit export false fc fg fi for function getopts hash help history if in jobs
 kill let local logout mapfile popd printf pushd pwd read readarray readonly return select set shift shopt source
 suspend test then time times trap true type typeset ulimit umask unalias unset until wait while [ [[ ] ]] { } ! . : "

# command_words FILE...: one line per command word found, as "word<TAB>file".
# A small shell reader: it follows quotes across lines, reads the commands
# inside $(...) and `...` (also within double quotes), skips comments,
# here-documents and arithmetic, and takes the first word of each simple
# command after assignments and keywords. In the Makefile it reads recipe
# lines only, where $(...) is make's, not a command, and $$( is the shell's.
command_words() {
    awk '
    function emit(w) {
        if (w == "case") { incase = 1 }
        else if (incase == 1 && w == "in") { incase = 2; done_cmd = 1; return }     # patterns follow
        else if (w == "esac") { incase = 0 }
        if (w != "" && !done_cmd) {
            if (w ~ /^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=/) return    # an assignment
            if (w ~ /^(then|do|else|elif|if|while|until|!|time|exec|command|builtin|local|export|declare|readonly)$/ && w !~ /^(local|export|declare|readonly)$/) return
            print w "\t" FILENAME
            done_cmd = 1
        }
    }
    # Programs that run the program named after their options: the first
    # word after them that is neither an option, the argument of an option nor a
    # number is a command too. The tests own wrappers: run_one LABEL CMD...,
    # expect CODE WHAT -- CMD... A command held in a variable ends the chain.
    function wrapper(w) { return w ~ /^(timeout|env|nice|xvfb-run|run_one|expect|sudo|stdbuf)$/ }
    function next_of(w) { return w == "expect" ? "dashdash" : w == "run_one" ? "label" : "cmd" }
    # options of the wrappers that take an argument
    function takes_arg(w) { return (wrapped == "env" && w == "-u") || (wrapped == "timeout" && w ~ /^-[ks]$/) || (wrapped == "xvfb-run" && w ~ /^-[snfepw]$/) || (wrapped == "nice" && w == "-n") }
    function endword() {
        if (want_next != "" && word != "") {
            if (want_next == "dashdash") { if (word == "--") want_next = "cmd" }
            else if (want_next == "label") want_next = "cmd"
            else if (skip_arg) skip_arg = 0
            else if (word ~ /^-/) skip_arg = takes_arg(word)
            else if (word ~ /^[0-9]/ || word ~ /^[A-Za-z_][A-Za-z0-9_]*=/) skip_arg = 0
            else if (word ~ /^(""|\$)/) want_next = ""
            else { print word "\t" FILENAME; start_wrap(word) }
        } else if (word != "" || quoted) {
            was = done_cmd; emit(word)
            if (!was && done_cmd) start_wrap(word)
        }
        word = ""; quoted = 0
    }
    function start_wrap(w) { if (wrapper(w)) { want_next = next_of(w); wrapped = w } else want_next = ""; skip_arg = 0 }
    function newcmd() { endword(); done_cmd = 0; want_next = "" }
    # A command substitution: the word around it counts as one word of the
    # outer command, whose reading goes on after it.
    function enter(m) {
        endword(); if (mode != "d") done_cmd = 1
        stack[++depth] = mode; held[depth] = done_cmd; wnext[depth] = want_next; mode = m
        done_cmd = 0; want_next = ""
    }
    function leave() { endword(); done_cmd = held[depth]; want_next = wnext[depth]; mode = stack[depth--] }
    FNR == 1 { make = (FILENAME ~ /Makefile$/); heredoc = ""; mode = "n"; depth = 0; word = ""; done_cmd = 0 }
    {
        line = $0
        if (heredoc != "") {                       # inside a here-document
            t = line; sub(/^\t+/, "", t)
            if (t == heredoc) heredoc = ""
            next
        }
        if (make && mode == "n") {
            if (line !~ /^\t/) next
            sub(/^\t[@-]*/, "", line)
            gsub(/\$\$/, "\001", line)              # the shell dollar of a recipe
            gsub(/\$[@<^*?%+|]/, "AUTO", line)      # make automatic variables
            while (gsub(/\$\([^()$]*\)/, "MAKEVAR", line)) {}   # make variables and calls
            gsub(/MAKEVAR/, "$V", line)
            gsub(/\001/, "$", line)
        }
        pending = ""
        n = length(line)
        for (i = 1; i <= n; i++) {
            c = substr(line, i, 1); c2 = substr(line, i, 2)
            if (mode == "s") { if (c == "\047") mode = stack[depth--]; continue }     # in single quotes
            if (mode == "d") {                                                   # in double quotes
                if (c == "\\") { i++; continue }
                if (c == "\"") { mode = stack[depth--]; continue }
                if (c2 == "$(" && substr(line, i, 3) != "$((") { i++; enter("n"); continue }
                if (c == "`") { enter("b"); continue }
                continue
            }
            # normal or backquoted code
            if (c == "\\") { i++; continue }
            if (c == "#" && word == "" && !quoted) break                     # a comment
            if (c == "\047") { stack[++depth] = mode; mode = "s"; quoted = 1; word = word "\"\""; continue }
            if (c == "\"") { stack[++depth] = mode; mode = "d"; quoted = 1; word = word "\"\""; continue }
            if (substr(line, i, 3) == "$((") {                               # arithmetic: skip to ))
                j = index(substr(line, i + 3), "))"); if (j == 0) break
                word = word "$N"; i = i + 2 + j + 1; continue
            }
            if (c2 == "((") { j = index(substr(line, i + 2), "))"); if (j == 0) break; i = i + 1 + j + 1; newcmd(); continue }
            if (c2 == "$(" || c2 == "<(" || c2 == ">(") { i++; enter("n"); continue }
            if (c == "`") {
                if (mode == "b") { leave(); continue }
                enter("b"); continue
            }
            if (c == ")" && depth > 0 && stack[depth] != "s") { leave(); continue }
            if (c2 == "<<" && substr(line, i, 3) != "<<<") {                 # a here-document starts
                rest = substr(line, i + 2); sub(/^-/, "", rest)
                if (match(rest, /^[ \t]*[\047"]?[A-Za-z_]+/)) { d = substr(rest, RSTART, RLENGTH); gsub(/[ \t\047"]/, "", d); pending = d }
                endword(); i++; continue
            }
            if (incase == 2) {                                               # a case pattern: skip to its )
                if (c == ")") { incase = 3; newcmd() }
                else if (c == " " || c == "\t") endword()
                else if (c2 == "es" && substr(line, i, 4) == "esac") { incase = 0; i += 3; newcmd() }
                continue
            }
            if (incase == 3 && c2 == ";;") { incase = 2; i++; endword(); continue }
            if (c == ";" || c == "|" || c == "&" || c == "(" || c == ")" || c == "{" || c == "}") { newcmd(); continue }
            if (c == " " || c == "\t") { endword(); continue }
            if ((c == "<" || c == ">") && word == "") { while (substr(line, i + 1, 1) ~ /[<>&0-9]/ && substr(line, i + 1, 2) !~ /^[<>]\(/) i++; skipnext = 1; continue }
            if (skipnext) { word = ""; skipnext = 0 }
            word = word c
        }
        if (mode == "n" || mode == "b") { if (substr(line, n, 1) != "\\") newcmd() }
        if (pending != "") heredoc = pending
    }' "$@"
}

# Functions the scripts define are not programs.
functions=" $(sed -n 's/^[ \t]*\([A-Za-z_][A-Za-z0-9_]*\)()[ \t]*{.*/\1/p' tests/*.sh scripts/*.sh | sort -u | tr '\n' ' ') "

# is_program WORD: a name that may be a program to look up (not a variable,
# a path of the project's own, an option or punctuation).
is_program() {
    case $1 in
        '$'* | '"'* | -* | *=* | '' | [0-9]* | '<'* | '>'* | *'$'* | .*) return 1 ;;
        tests/* | scripts/* | build/* | ./* | '$('*) return 1 ;;
    esac
    case " $(echo $builtins) " in *" $1 "*) return 1 ;; esac
    case $functions in *" $1 "*) return 1 ;; esac
    [[ $1 =~ ^[A-Za-z0-9_./+-]+$ ]]
}

# owners WORD...: "word<TAB>package" for each program found in /usr/bin, /bin,
# /usr/sbin or /sbin; package empty when no Debian package owns it. dpkg may
# record /bin/mv where the merged /usr shows /usr/bin/mv, and awk is an
# alternative (a link to mawk): the path, /bin's, and where links end are all
# asked, in one dpkg call.
owners() {
    local name dir path
    declare -A found=()
    local paths=()
    for name in "$@"; do
        for dir in /usr/bin /bin /usr/sbin /sbin; do
            if [ -e "$dir/$name" ]; then
                found[$name]="$dir/$name /bin/$name $(readlink -f "$dir/$name")"
                paths+=(${found[$name]})
                break
            fi
        done
    done
    local db=""
    [ ${#paths[@]} -gt 0 ] && db=$(dpkg -S "${paths[@]}" 2>/dev/null)
    for name in "$@"; do
        local pkg=""
        for path in ${found[$name]:-}; do
            pkg=$(awk -v p="$path" '{ i = index($0, ": "); if (substr($0, i + 2) == p) { s = substr($0, 1, i - 1); sub(/:.*/, "", s); sub(/, .*/, "", s); print s; exit } }' <<<"$db")
            [ -n "$pkg" ] && break
        done
        printf '%s\t%s\n' "$name" "$pkg"
    done
}

# check FILE...: prints one line per program no allowed package provides.
check() {
    local allowed word file pkg
    allowed=" $(grep -v '^#' "$stock" | tr '\n' ' ') $(deps_packages | tr '\n' ' ') "
    declare -A where=()
    while IFS=$'\t' read -r word file; do
        is_program "$word" && [ -z "${where[${word##*/}]:-}" ] && where[${word##*/}]=$file
    done < <(command_words "$@" | sort -u)
    [ ${#where[@]} -gt 0 ] || return 0
    while IFS=$'\t' read -r word pkg; do
        file=${where[$word]}
        if [ -z "$pkg" ]; then
            echo "$file calls '$word', which is not installed from any Debian package (add it to scripts/deps.sh)"
        elif [[ $allowed != *" $pkg "* ]]; then
            echo "$file calls '$word' (Debian package $pkg), which neither scripts/deps.sh installs nor the stock machine has"
        fi
    done < <(owners "${!where[@]}")
}

# The tests, the Makefile and the scripts they run. Not scripts/deps.sh: it
# runs before anything is installed and checks for each program it uses (sudo
# only when there); nor the scripts that regenerate fixtures or tables by hand.
sources=(tests/*.sh Makefile)
for s in scripts/*.sh; do
    [ "$s" = scripts/deps.sh ] && continue
    grep -q "$s" Makefile tests/*.sh scripts/run-tests.sh && sources+=("$s")
done

# 1. the tree as it is
problems=$(check "${sources[@]}")
if [ -z "$problems" ]; then ok; else bad "programs nothing installs:"$'\n'"$problems"; fi

# 2. the guard catches a planted call, in a command substitution and after a pipe
for planted in 'size=$(identify -format %w "$f")' 'cat "$f" | magick -size 1x1 x'; do
    cp tests/png_test.sh "$tmp/png_test.sh"
    printf '%s\n' "$planted" >>"$tmp/png_test.sh"
    found=$(check "$tmp/png_test.sh")
    case $found in *"calls '"*) ok ;; *) bad "the guard missed: $planted" ;; esac
done

# 3. the words it sees are the ones expected of a line (a check of the reader itself)
printf 'x=1 y=2 sed s/a/b/ f | sort -u && { uniq; } ; out=$(cmp -s a b) # grep\n' >"$tmp/words.sh"
words=$(command_words "$tmp/words.sh" | cut -f1 | tr '\n' ' ')
[ "$words" = "sed sort uniq cmp " ] && ok || bad "command words of a test line: '$words', want 'sed sort uniq cmp '"

finish
