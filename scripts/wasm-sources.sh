#!/usr/bin/env bash
# The C libraries the WebAssembly build compiles from source, as Debian ships
# them (Debian's patches applied): cJSON (every JSON tscope reads), zlib
# (CRC-32) and cmocka (the unit tests `make wasm-check` runs under Node). The native build links Debian's binary packages; a browser needs
# them compiled for wasm32, and Emscripten's own ports would be downloaded
# from elsewhere. Fetched once with apt-get source through a private list of
# Debian's source archive (the machine's apt configuration is left alone).
#   scripts/wasm-sources.sh DIR     (DIR/cjson, DIR/zlib, DIR/cmocka, DIR/include; nothing to do when there)
set -euo pipefail
dir=${1:?usage: scripts/wasm-sources.sh DIR}
# what each package leaves that says it is there
have() {
    case $1 in
    cjson) [ -f "$dir/include/cjson/cJSON.h" ] ;;
    zlib) [ -f "$dir/zlib/crc32.c" ] ;;
    cmocka) [ -f "$dir/cmocka/src/cmocka.c" ] ;;
    esac
}
missing=()
for pkg in cjson zlib cmocka; do have "$pkg" || missing+=("$pkg"); done
[ ${#missing[@]} -eq 0 ] && exit 0
command -v dpkg-source >/dev/null || { echo "wasm-sources: dpkg-source is missing: run scripts/deps.sh web" >&2; exit 1; }
. /etc/os-release
suite=${VERSION_CODENAME:?wasm-sources: /etc/os-release names no Debian release}
apt_dir=$(mktemp -d)
trap 'rm -rf "$apt_dir"' EXIT
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache" "$dir"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" \
    >"$apt_dir/sources.list"
apt=(apt-get -q -o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/nonexistent
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o APT::Sandbox::User=root)
"${apt[@]}" update >"$apt_dir/log" 2>&1 || { cat "$apt_dir/log" >&2; echo "wasm-sources: apt-get update of Debian's sources failed" >&2; exit 1; }
for pkg in "${missing[@]}"; do
    rm -rf "$dir/$pkg" "$apt_dir/get"
    mkdir -p "$apt_dir/get"
    (cd "$apt_dir/get" && "${apt[@]}" source "$pkg" >>"$apt_dir/log" 2>&1) ||
        { tail -5 "$apt_dir/log" >&2; echo "wasm-sources: apt-get source $pkg failed" >&2; exit 1; }
    src=$(find "$apt_dir/get" -mindepth 1 -maxdepth 1 -type d | head -1)
    mv "$src" "$dir/$pkg"
done
# the code names the header both ways: <cJSON.h> and <cjson/cJSON.h>
mkdir -p "$dir/include/cjson"
cp "$dir/cjson/cJSON.h" "$dir/include/cjson/"
echo "wasm-sources: Debian's ${missing[*]} sources in $dir"
