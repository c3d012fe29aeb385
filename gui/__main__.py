"""``python -m gui [PATH]`` opens the inspector."""

import sys

from gui.app import main

raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else None))
