import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

os.environ.setdefault("PULLBACK_VERIFY", "1")  # every staged function is verified
# The bulk of the suite checks staging, passes and AD on the reference interpreter;
# tests of the native backend ask for it (backend="c") or unset this.
os.environ.setdefault("PULLBACK_BACKEND", "interp")
# The suite compiles thousands of small modules: gcc's -O1 builds them faster than the
# default -O3; answers move by rounding only, within the tests' documented bounds (the
# speed of the generated code is measured in benchmarks/, never here).
os.environ.setdefault("PULLBACK_CFLAGS", "-O1")
