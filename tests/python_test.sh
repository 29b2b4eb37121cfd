#!/usr/bin/env bash
# The Python package (python/tscope, docs/python.md) over libtscope.so: its tests
# (tests/python/test_tscope.py: against `tscope run --trace` and PyTorch's fixtures in
# tests/ref/python) run twice, from the checkout with PYTHONPATH=python and in a virtual
# environment made as README says; then the tutorial's code, run as written.
. "$(dirname "$0")/lib.sh"

# Debian's python3 (numpy is Debian's python3-numpy), not another one earlier on PATH.
py=${PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=$(command -v python3)
lib=$(abs "${TSCOPE_LIB:-build/libtscope.so}")
export TSCOPE="$bin" TSCOPE_LIB="$lib"

if [ ! -e "$lib" ]; then
    bad "$lib is missing (make python builds it)"
    finish
fi

# run_py LABEL COMMAND...: the test script's own "N passed, N failed" added to ours.
run_py() {
    local label=$1
    shift
    "$@" >"$tmp/py.log" 2>&1
    local rc=$? p f
    p=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' "$tmp/py.log" | tail -1)
    f=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' "$tmp/py.log" | tail -1)
    passed=$((passed + ${p:-0}))
    if [ "${f:-0}" != 0 ] || [ "$rc" != 0 ] || [ -z "$p" ]; then
        failed=$((failed + ${f:-1}))
        echo "FAIL: $label (exit $rc):"
        cat "$tmp/py.log"
    else
        grep -E '^  ' "$tmp/py.log" | sed "s/^/$label:/"
    fi
}

run_py checkout env PYTHONPATH=python "$py" tests/python/test_tscope.py

# the virtual environment, made as README says
if "$py" -m venv --system-site-packages --without-pip "$tmp/venv" >"$tmp/venv.log" 2>&1 &&
    "$tmp/venv/bin/python" python/install.py >>"$tmp/venv.log" 2>&1; then
    ok
    (cd "$tmp" && env -u PYTHONPATH "$tmp/venv/bin/python" -c 'import tscope, sys; print(tscope.__file__)') \
        >"$tmp/where" 2>&1
    if grep -q "^$PWD/python/tscope/__init__.py" "$tmp/where"; then ok; else bad "the venv imports $(cat "$tmp/where")"; fi
    run_py venv env -u PYTHONPATH "$tmp/venv/bin/python" tests/python/test_tscope.py
else
    bad "the venv: $(cat "$tmp/venv.log")"
fi

# the tutorial: its code blocks run, and the numbers its text quotes are the ones they print
if [ -e docs/python.md ]; then
    run_py tutorial env PYTHONPATH=python "$py" tests/python/run_tutorial.py docs/python.md
fi
finish
