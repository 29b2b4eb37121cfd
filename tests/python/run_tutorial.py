"""Run a Markdown tutorial's Python as a test: its ```python blocks in order, in one namespace,
from the top of the checkout; what they print must be its ```text blocks, every number in its
prose must be one the code printed, the code must stay under 40 lines, and a `fig` it makes must
show in a notebook (_repr_png_). Ends with "N passed, N failed".

    PYTHONPATH=python python3 tests/python/run_tutorial.py docs/python.md
"""
import contextlib
import io
import os
import re
import sys

path = sys.argv[1]
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.chdir(root)
text = open(path).read()
blocks = re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)
code = [b for kind, b in blocks if kind == "python"]
want = "".join(b for kind, b in blocks if kind == "text")
prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what}")


out = io.StringIO()
ns = {"__name__": "__tutorial__"}
with contextlib.redirect_stdout(out):
    for b in code:
        exec(compile(b, path, "exec"), ns)
got = out.getvalue()
check(got == want, f"the code prints\n{got}\nbut the page shows\n{want}")
lines = sum(b.count("\n") for b in code)
check(lines < 40, f"{lines} lines of code, not under 40")
printed = set(re.findall(r"\d+\.\d+", got))
section = prose[prose.index("## The induction heads"):prose.index("## The same from the command line")]
for number in re.findall(r"(?<![\w.])\d+\.\d+(?![\w.])", section):
    check(number in printed, f"the prose quotes {number}, which the code does not print")
fig = ns.get("fig")
check(fig is not None and fig._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n", "fig has no PNG")
check(fig is not None and "<svg" in fig._repr_svg_(), "fig has no SVG")
print(f"  tutorial: {lines} lines of code, {len(printed)} numbers printed")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
