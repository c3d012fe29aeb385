"""``python -m memlens`` runs the memlens command line."""

import sys

from memlens.cli import main

sys.exit(main())
