#!/usr/bin/env bash
# Check the system packages tscope needs; install the missing ones with apt-get
# (as root, or through sudo). Elsewhere, stop with one line naming them.
#   scripts/deps.sh          build and test dependencies
#   scripts/deps.sh --check  only report, install nothing (exit 1 if missing)
set -euo pipefail

check_only=0
[ "${1:-}" = "--check" ] && check_only=1

# pkg-config module -> Debian package
pc_modules=(sdl2:libsdl2-dev cairo:libcairo2-dev pangocairo:libpango1.0-dev zlib:zlib1g-dev
            libcjson:libcjson-dev md4c:libmd4c-dev cmocka:libcmocka-dev)
# header -> Debian package (for libraries that ship no .pc file)
headers=(/usr/include/stb/stb_image_write.h:libstb-dev)
# command -> Debian package (the GUI tests run under Xvfb; fonts for readable text)
commands=(pkg-config:pkg-config xvfb-run:xvfb xauth:xauth)
files=(/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf:fonts-dejavu-core)

missing=()
have_pkgconfig=0
command -v pkg-config >/dev/null 2>&1 && have_pkgconfig=1
for entry in "${pc_modules[@]}"; do
    mod=${entry%%:*} pkg=${entry#*:}
    if [ $have_pkgconfig = 0 ] || ! pkg-config --exists "$mod"; then missing+=("$pkg"); fi
done
for entry in "${headers[@]}" "${files[@]}"; do
    path=${entry%%:*} pkg=${entry#*:}
    [ -e "$path" ] || missing+=("$pkg")
done
for entry in "${commands[@]}"; do
    cmd=${entry%%:*} pkg=${entry#*:}
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done

[ ${#missing[@]} -eq 0 ] && exit 0
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
elif command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
else
    echo "deps: not root and no sudo; as root run: apt-get install ${missing[*]}" >&2
    exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null; then
    "${sudo[@]}" apt-get update -q </dev/null
    "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
fi
