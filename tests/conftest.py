import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

os.environ.setdefault("PULLBACK_VERIFY", "1")  # every staged function is verified
# The bulk of the suite checks staging, passes and AD on the reference interpreter;
# tests of the native backend ask for it (backend="c") or unset this.
os.environ.setdefault("PULLBACK_BACKEND", "interp")
