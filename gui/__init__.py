"""memlens desktop app: a PySide6 inspector over :mod:`core`'s public API.

Start it with ``memlens gui [--db PATH]`` or ``python -m memlens.gui``. Qt is imported only through :mod:`memlens.gui.qt`; this
package's ``commands`` module is loaded by the CLI without importing Qt at all.
"""
