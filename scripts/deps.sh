#!/usr/bin/env bash
# Check the system packages tscope needs; install the missing ones with apt-get
# (as root, or through sudo). Elsewhere, or without root, stop with one line
# naming them.
#   scripts/deps.sh [--check | --list] [GROUP...]
# GROUP: test (the default: build, tests, `make run`), web (the browser tests
# of `tscope site`, which `make test` runs too: chromium, node, npm, then
# puppeteer-core into tests/web/node_modules from its package-lock.json),
# bench (the peers `make bench` measures against), fuzz (`make fuzz`), train
# (the corpus of `make train-lm`). --check only reports (exit 1 when something is missing); --list
# prints every package of the groups, one a line, installed or not.
# A new Debian/Ubuntu machine has gcc, make and apt; tests/tools_test.sh checks
# that every program the tests run is either on such a machine or here.
set -euo pipefail

check_only=0 list_only=0
groups=()
for arg in "$@"; do
    case $arg in
        --check) check_only=1 ;;
        --list) list_only=1 ;;
        test | web | bench | fuzz | train) groups+=("$arg") ;;
        *) echo "deps: unknown argument '$arg' (groups: test web bench fuzz train; --check, --list)" >&2; exit 2 ;;
    esac
done
[ ${#groups[@]} -eq 0 ] && groups=(test)

# Each group lists what:package words: what shows the package is there.
#   module:NAME  a pkg-config module           cmd:NAME    a command on PATH
#   file:PATH    a file                        pkg:        the package is installed (dpkg)
group_test=(
    cmd:pkg-config:pkg-config
    module:sdl2:libsdl2-dev module:cairo:libcairo2-dev module:pangocairo:libpango1.0-dev module:zlib:zlib1g-dev
    module:libcjson:libcjson-dev module:md4c:libmd4c-dev module:md4c-html:libmd4c-html0-dev module:cmocka:libcmocka-dev
    file:/usr/include/stb/stb_image_write.h:libstb-dev
    cmd:xvfb-run:xvfb cmd:xauth:xauth
    file:/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf:fonts-dejavu-core
    cmd:rsvg-convert:librsvg2-bin cmd:pdftoppm:poppler-utils
)
# A browser and node for tests/web (puppeteer-core itself comes from npm, below).
group_web=(cmd:chromium:chromium cmd:node:nodejs cmd:npm:npm)
# OpenBLAS for `tscope bench gemm` (opened with dlopen); PyTorch for the peer
# scripts, and OpenBLAS so that PyTorch does not fall back to the reference BLAS.
group_bench=(pkg::libopenblas0-pthread pkg::python3-torch pkg::python3-numpy)
# libFuzzer comes with clang's runtime.
group_fuzz=(cmd:clang:clang pkg::libclang-rt-14-dev)
# The King James Bible, the default corpus of `tscope train --task lm`.
group_train=(cmd:bible:bible-kjv)

have() { # have KIND:WHAT
    local kind=${1%%:*} what=${1#*:}
    case $kind in
        module) command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "$what" ;;
        cmd) command -v "$what" >/dev/null 2>&1 ;;
        file) [ -e "$what" ] ;;
        pkg) return 1 ;; # decided by dpkg below
    esac
}

if [ $list_only = 1 ]; then
    for g in "${groups[@]}"; do
        declare -n list="group_$g"
        printf '%s\n' "${list[@]##*:}"
        unset -n list
    done | sort -u
    exit 0
fi

missing=()
for g in "${groups[@]}"; do
    declare -n list="group_$g"
    for entry in "${list[@]}"; do
        pkg=${entry##*:}
        check=${entry%:*}
        if [ "${check%%:*}" = pkg ]; then
            status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
            [ "$status" = "install ok installed" ] || missing+=("$pkg")
        elif ! have "$check"; then
            missing+=("$pkg")
        fi
    done
    unset -n list
done

# npm's part of the web group: puppeteer-core as package-lock.json pins it,
# into tests/web/node_modules (npm ci; nothing global).
web_npm() {
    local g
    for g in "${groups[@]}"; do [ "$g" = web ] || continue
        [ -f tests/web/node_modules/puppeteer-core/package.json ] && return 0
        if [ $check_only = 1 ]; then echo "deps: missing npm packages: puppeteer-core (in tests/web)" >&2; return 1; fi
        echo "deps: npm ci in tests/web (puppeteer-core)"
        (cd tests/web && npm ci --no-audit --no-fund --loglevel=error) || { echo "deps: npm ci in tests/web failed" >&2; return 1; }
    done
    return 0
}
cd "$(dirname "$0")/.."

if [ ${#missing[@]} -eq 0 ]; then web_npm; exit; fi
# one name per package, in a stable order
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)

if [ $check_only = 1 ]; then
    echo "deps: missing packages: ${missing[*]}" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "deps: no apt-get here; install these packages (Debian names) by hand: ${missing[*]}" >&2
    exit 1
fi
if [ "$(id -u)" = 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
else
    echo "deps: not root, and sudo needs a password here; as root run: apt-get install ${missing[*]}" >&2
    exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null; then
    "${sudo[@]}" apt-get update -q </dev/null
    "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
fi
web_npm
