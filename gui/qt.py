"""The one place PySide6 is imported from.

Every other module of the app writes ``from memlens.gui.qt import QtCore, QtWidgets, Signal`` so that the binding (and its
optional modules, QtCharts and QtSvg) is chosen in one spot, and so that ``core`` stays free of Qt: nothing under
``core/`` may import this module.

PySide6 6.12.0 on CPython 3.11 hands ``None``/``True``/``False`` back to Python without taking a reference (an invalid
QVariant, the result of ``emit()``), which eventually aborts the interpreter ("deallocating None"); pyproject.toml
therefore pins PySide6 below 6.12. As a second line of defence the app never reads back item data it left unset: an
empty string or 0 stands for "nothing".
"""

from __future__ import annotations

from PySide6 import QtCharts, QtCore, QtGui, QtSvg, QtWidgets
from PySide6.QtCore import Property, QObject, Qt, QThread, QTimer, Signal, Slot

__all__ = [
    "Property",
    "QObject",
    "QThread",
    "QTimer",
    "Qt",
    "QtCharts",
    "QtCore",
    "QtGui",
    "QtSvg",
    "QtWidgets",
    "Signal",
    "Slot",
]
