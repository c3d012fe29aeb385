"""``memlens gui [--db PATH]``: registered through the ``memlens.commands`` entry point.

This module must stay importable without Qt: the CLI loads it to build its parser, and PySide6 is imported only
when the command runs.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    """Add the ``gui`` subcommand."""
    # `sub` makes memlens.cli's CommandParser, which adds --db and --json (before or after `gui`, as documented).
    p = sub.add_parser("gui", help="open the desktop inspector (PySide6) on the store", description="Open the desktop inspector (PySide6) on the store.")
    p.add_argument(
        "--theme", choices=["system", "light", "dark"], help="colour theme: system, light or dark (default: the saved choice, at first system; this one is saved)"
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="open the window on the store, wait for its first page, then close and exit 0 (checks an installation)",
    )
    p.set_defaults(handler=cmd_gui)


def cmd_gui(args: argparse.Namespace) -> int:
    """Start the desktop app on ``--db`` / ``$MEMLENS_DB`` / the default store."""
    from memlens.cli import store_path

    try:
        from memlens.gui.app import main
    except ImportError as exc:
        from memlens.errors import MemlensError

        raise MemlensError(f"the desktop app needs PySide6 (pip install 'memlens[gui]'): {exc}") from None
    return main(store_path(args), theme_name=args.theme, check=args.check)
