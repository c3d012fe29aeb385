"""``python -m core`` runs the memlens command line."""

import sys

from core.cli import main

sys.exit(main())
