"""Install python/tscope into the Python that runs this (a virtual environment's, say) by pointing
it at this checkout: a tscope.pth file in its site-packages naming python/. The package then loads
this checkout's build/libtscope.so (`make python` builds it; $TSCOPE_LIB overrides).

    python3 -m venv --system-site-packages .venv && .venv/bin/python python/install.py

--system-site-packages lets the environment use Debian's python3-numpy (no PyPI needed).
"""
import os
import sys
import sysconfig

here = os.path.dirname(os.path.abspath(__file__))
site = sysconfig.get_paths()["purelib"]
if sys.prefix == sys.base_prefix and "--system" not in sys.argv:
    sys.exit("install.py: this Python is not a virtual environment's; run it with the environment's python "
             "(or add --system to install into " + site + ")")
os.makedirs(site, exist_ok=True)
with open(os.path.join(site, "tscope.pth"), "w") as f:
    f.write(here + "\n")
print(f"tscope: installed into {site} (tscope.pth -> {here})")
