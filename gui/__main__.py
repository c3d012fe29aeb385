"""``python -m memlens.gui [PATH]`` opens the inspector."""

import sys

from memlens.gui.app import main

raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else None))
