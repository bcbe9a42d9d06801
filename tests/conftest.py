import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

os.environ.setdefault("PULLBACK_VERIFY", "1")  # every staged function is verified
