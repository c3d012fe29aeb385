"""core/ never imports Qt: import every core module (installed as memlens.*) in a clean interpreter and check
PySide6, and the app (memlens.gui), stayed out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_core_never_loads_qt(tmp_path):
    modules = sorted(
        ".".join(("memlens", *p.relative_to(ROOT / "core").with_suffix("").parts)).removesuffix(".__init__")
        for p in (ROOT / "core").rglob("*.py")
        if p.name != "__main__.py"
    )
    assert "memlens.store" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'shiboken6') or m.startswith('memlens.gui'))\n"
        "assert not bad, bad\n"
        "from memlens.cli import build_parser\n"
        "build_parser()  # registering every command, the gui's included, must not load Qt either\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'shiboken6'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)  # not the checkout: only the installed name may resolve
