#!/usr/bin/env bash
# Check the system packages tscope needs; install the missing ones with apt-get
# (as root, or through sudo). Elsewhere, or without root, stop with one line
# naming them.
#   scripts/deps.sh [--check | --list] [GROUP...]
# GROUP: test (the default: build, tests, `make run`), web (the browser tests
# of `tscope site`, which `make test` runs too: chromium, node, npm, then
# puppeteer-core into tests/web/node_modules from its package-lock.json; and
# emscripten for `make wasm`),
# bench (the peers `make bench` measures against), fuzz (`make fuzz`), train
# (the corpus of `make train-lm`), cross (`make cross-check`: an ARM64 cross
# compiler, qemu, and the compute side's libraries for arm64 through Debian's
# multiarch), clang (`make CC=clang`). --check only reports (exit 1 when
# something is missing); --list prints every package of the groups, one a
# line, installed or not.
# A new Debian/Ubuntu machine has gcc, make and apt; tests/tools_test.sh checks
# that every program the tests run is either on such a machine or here.
# On macOS the same groups name Homebrew formulas (see the end of this file).
set -euo pipefail

check_only=0 list_only=0
groups=()
for arg in "$@"; do
    case $arg in
        --check) check_only=1 ;;
        --list) list_only=1 ;;
        test | web | bench | fuzz | train | cross | clang) groups+=("$arg") ;;
        *) echo "deps: unknown argument '$arg' (groups: test web bench fuzz train cross clang; --check, --list)" >&2; exit 2 ;;
    esac
done
[ ${#groups[@]} -eq 0 ] && groups=(test)

# Each group lists what:package words: what shows the package is there.
#   module:NAME  a pkg-config module           cmd:NAME    a command on PATH
#   file:PATH    a file                        pkg:        the package is installed (dpkg)
#   arm64:       the package is installed for arm64 (dpkg, multiarch: NAME:arm64)
group_test=(
    cmd:pkg-config:pkg-config
    module:sdl2:libsdl2-dev module:cairo:libcairo2-dev module:pangocairo:libpango1.0-dev module:zlib:zlib1g-dev module:libzip:libzip-dev
    module:libcjson:libcjson-dev module:md4c:libmd4c-dev module:md4c-html:libmd4c-html0-dev module:cmocka:libcmocka-dev
    file:/usr/include/stb/stb_image_write.h:libstb-dev
    cmd:xvfb-run:xvfb cmd:xauth:xauth
    file:/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf:fonts-dejavu-core
    cmd:rsvg-convert:librsvg2-bin cmd:pdftoppm:poppler-utils
    cmd:python3:python3 pkg::python3-numpy pkg::python3-venv
)
# A browser and node for tests/web (puppeteer-core itself comes from npm, below);
# Debian's emscripten for `make wasm` (the live page), and dpkg-source, with which
# scripts/wasm-sources.sh unpacks Debian's cJSON and zlib sources for it.
group_web=(cmd:chromium:chromium cmd:node:nodejs cmd:npm:npm cmd:emcc:emscripten cmd:dpkg-source:dpkg-dev)
# OpenBLAS for `tscope bench gemm` (opened with dlopen); PyTorch for the peer
# scripts, and OpenBLAS so that PyTorch does not fall back to the reference BLAS.
group_bench=(pkg::libopenblas0-pthread pkg::python3-torch pkg::python3-numpy)
# libFuzzer comes with clang's runtime.
group_fuzz=(cmd:clang:clang pkg::libclang-rt-14-dev)
# `make CC=clang` (the Makefile asks for it): clang and its OpenMP runtime.
group_clang=(cmd:clang:clang pkg::libomp-dev)
# The King James Bible, the default corpus of `tscope train --task lm`.
group_train=(cmd:bible:bible-kjv)
# `make cross-check`: src/ and its unit tests for ARM64, run under qemu-user.
# The compute side needs only zlib, cJSON and md4c (cmocka for the tests).
group_cross=(cmd:aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu cmd:qemu-aarch64-static:qemu-user-static
    arm64::zlib1g-dev arm64::libcjson-dev arm64::libmd4c-dev arm64::libcmocka-dev arm64::libzip-dev)

have() { # have KIND:WHAT
    local kind=${1%%:*} what=${1#*:}
    case $kind in
        module) command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "$what" ;;
        cmd) command -v "$what" >/dev/null 2>&1 ;;
        file) [ -e "$what" ] ;;
        pkg | arm64) return 1 ;; # decided by dpkg below
    esac
}

# macOS: the groups as Homebrew formulas. stb has no formula: the build takes
# its headers from STB_INCLUDE=DIR (a copy of the stb repository). OpenMP comes
# from libomp (or build with NO_OMP=1). The GUI tests need Xvfb, which
# Homebrew does not have: `make test` there is expected to stop at those.
brew_test=(pkg-config sdl2 cairo pango cjson md4c cmocka libomp librsvg poppler)
brew_bench=(openblas pytorch numpy)
brew_fuzz=(llvm)
if [ "$(uname -s)" = Darwin ]; then
    formulas=()
    for g in "${groups[@]}"; do
        case $g in
            test) formulas+=("${brew_test[@]}") ;;
            bench) formulas+=("${brew_bench[@]}") ;;
            fuzz) formulas+=("${brew_fuzz[@]}") ;;
            clang) ;; # Apple's clang is the compiler there; libomp is in the test group
            train) echo "deps: no Homebrew formula has the King James Bible (Debian's bible-kjv); train on your own --corpus" >&2; exit 1 ;;
            cross) echo "deps: make cross-check runs on a Debian host (an ARM64 Mac builds and tests natively)" >&2; exit 1 ;;
        esac
    done
    if [ $list_only = 1 ]; then printf '%s\n' "${formulas[@]}" | sort -u; exit 0; fi
    if ! command -v brew >/dev/null 2>&1; then
        echo "deps: macOS without Homebrew; install Homebrew, then: brew install ${formulas[*]}" >&2
        exit 1
    fi
    missing=()
    for f in "${formulas[@]}"; do brew list --formula "$f" >/dev/null 2>&1 || missing+=("$f"); done
    stb_ok=1
    if [[ " ${groups[*]} " == *" test "* ]] && [ ! -e "${STB_INCLUDE:-/nonexistent}/stb_image_write.h" ]; then
        echo "deps: no formula has stb's headers: put stb_image.h and stb_image_write.h in a directory DIR and set STB_INCLUDE=DIR" >&2
        stb_ok=0
    fi
    if [ ${#missing[@]} -gt 0 ]; then
        if [ $check_only = 1 ]; then
            echo "deps: missing formulas: ${missing[*]}" >&2
            exit 1
        fi
        echo "deps: brew install ${missing[*]}"
        brew install "${missing[@]}"
    fi
    [ $stb_ok = 1 ]
    exit
fi

if [ $list_only = 1 ]; then
    for g in "${groups[@]}"; do
        declare -n list="group_$g"
        for entry in "${list[@]}"; do
            case $entry in arm64:*) echo "${entry##*:}:arm64" ;; *) echo "${entry##*:}" ;; esac
        done
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
        if [ "${check%%:*}" = arm64 ]; then pkg=$pkg:arm64; fi
        if [ "${check%%:*}" = pkg ] || [ "${check%%:*}" = arm64 ]; then
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
# arm64 packages need the architecture added and its package lists fetched first.
if printf '%s\n' "${missing[@]}" | grep -q ':arm64$' && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    "${sudo[@]}" dpkg --add-architecture arm64
    "${sudo[@]}" apt-get update -q </dev/null
fi
if ! "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null; then
    "${sudo[@]}" apt-get update -q </dev/null
    "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
fi
web_npm
