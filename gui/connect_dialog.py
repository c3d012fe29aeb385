"""File > Connect: the dialog that takes a PostgreSQL URL, the prompt that asks for its password when the server
wants one, and the small rules about URLs and passwords the window follows.

The password is held in memory only, inside the URL the window's reader, tasks and live view connect with. What is
shown or saved (the title, the status bar, the recent list, messages) is always :func:`shown_url`, which has none.
"""

from __future__ import annotations

import html
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from memlens.gui.qt import QtCore, QtGui, QtWidgets
from memlens.postgres.connection import is_url, redact_url

URL_PLACEHOLDER = "postgresql://user@host:5432/database"


def with_password_in_netloc(url: str) -> str:
    """``url`` with a ``password=`` query parameter moved into the user part, where :func:`redact_url` (and the
    engine's messages, which use it) will find and hide it. libpq accepts either place."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    passwords = [value for key, value in query if key == "password"]
    if not passwords:
        return url
    rest = urlencode([(key, value) for key, value in query if key != "password"], safe="/")
    return with_password(urlunsplit((parts.scheme, parts.netloc, parts.path, rest, parts.fragment)), passwords[-1])


def with_password(url: str, password: str) -> str:
    """``url`` carrying ``password`` (replacing any it had)."""
    parts = urlsplit(url)
    user = quote(unquote(parts.username or ""), safe="")
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{user}:{quote(password, safe='')}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def has_password(url: str) -> bool:
    """Whether ``url`` carries a password of its own."""
    return urlsplit(url).password is not None


def shown_url(url: str) -> str:
    """``url`` as it may be shown or saved: no password, wherever it was written."""
    return redact_url(with_password_in_netloc(url))


def needs_password(error: BaseException) -> bool:
    """Whether opening failed because the server wants a password it was not given (or a right one). The engine
    reports a refused connection as a StoreEnvironmentError carrying libpq's words, so these are matched."""
    text = str(error)
    return "no password supplied" in text or "password authentication failed" in text


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot name a PostgreSQL database, or None when it can (the server may still refuse it)."""
    if not is_url(url):
        return "A PostgreSQL URL begins with postgresql:// (or postgres://)"
    try:
        urlsplit(url).port  # noqa: B018  # raises for a port that is not a number
    except ValueError:
        return "The port after the host must be a number (e.g. :5432)"
    return None


def server_name(url: str) -> str:
    """A PostgreSQL store as a person names it: ``user@host:port/database`` (no password, no scheme)."""
    parts = urlsplit(shown_url(url))
    query = dict(parse_qsl(parts.query))
    host = parts.hostname or query.get("host", "localhost")
    if host.startswith("/"):
        host = "localhost (socket)"  # a Unix socket's folder says nothing to a person; the tooltip has it
    port = parts.port or query.get("port")
    user = f"{unquote(parts.username)}@" if parts.username else ""
    return f"{user}{host}{f':{port}' if port else ''}/{unquote(parts.path.lstrip('/'))}"


class ConnectDialog(QtWidgets.QDialog):
    """Asks for the URL of a PostgreSQL database; ``url()`` is what was typed (password included, if typed)."""

    def __init__(self, initial: str = "", parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("connectDialog")
        self.setWindowTitle("Connect to PostgreSQL")
        self.setMinimumWidth(520)
        layout = QtWidgets.QVBoxLayout(self)
        intro = QtWidgets.QLabel("Open a memlens store on a PostgreSQL server, shared by a team's agents.")
        intro.setWordWrap(True)
        layout.addWidget(intro)
        form = QtWidgets.QFormLayout()
        self.url_edit = QtWidgets.QLineEdit(initial)
        self.url_edit.setObjectName("connectUrl")
        self.url_edit.setAccessibleName("Database URL")
        self.url_edit.setPlaceholderText(URL_PLACEHOLDER)
        self.url_edit.setClearButtonEnabled(True)
        form.addRow("&URL:", self.url_edit)
        layout.addLayout(form)
        self.problem = QtWidgets.QLabel()
        self.problem.setObjectName("connectProblem")
        self.problem.setWordWrap(True)
        self.problem.hide()
        layout.addWidget(self.problem)
        note = QtWidgets.QLabel(
            "The password is taken from the URL if you type it there, else from $PGPASSWORD or ~/.pgpass; "
            "if the server still wants one, you are asked for it. It is never saved: the recent list keeps the URL without it. "
            "An empty database gets the memlens tables."
        )
        note.setObjectName("connectNote")
        note.setWordWrap(True)
        note.setForegroundRole(QtGui.QPalette.ColorRole.PlaceholderText)
        layout.addWidget(note)
        self.buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Ok | QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        self.connect_button = self.buttons.button(QtWidgets.QDialogButtonBox.StandardButton.Ok)
        self.connect_button.setText("&Connect")
        self.connect_button.setObjectName("connectButton")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self.url_edit.textChanged.connect(self._check)
        self._check()

    def url(self) -> str:
        """The URL typed, trimmed."""
        return self.url_edit.text().strip()

    def _check(self) -> None:
        problem = url_problem(self.url())
        self.connect_button.setEnabled(problem is None)
        self.connect_button.setToolTip(problem or "")
        # Nothing typed yet is not a mistake: the placeholder shows the form.
        shown = problem if problem and self.url() else ""
        if shown != self.problem.text():
            self.problem.setText(shown)
            self.problem.setVisible(bool(shown))
            self.adjustSize()  # room for the line, so the note below is not clipped


class PasswordDialog(QtWidgets.QDialog):
    """Asks for the password of the user a URL names (``wrong``: the last one was refused)."""

    def __init__(self, url: str, *, wrong: bool, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("passwordDialog")
        self.setWindowTitle("PostgreSQL password")
        layout = QtWidgets.QVBoxLayout(self)
        said = "The server refused that password. " if wrong else "The server asks for a password. "
        label = QtWidgets.QLabel(f"{said}Password for <b>{html.escape(server_name(url))}</b>:")
        label.setTextFormat(QtCore.Qt.TextFormat.RichText)
        label.setObjectName("passwordPrompt")
        layout.addWidget(label)
        self.password_edit = QtWidgets.QLineEdit()
        self.password_edit.setObjectName("passwordEdit")
        self.password_edit.setAccessibleName("Password")
        self.password_edit.setEchoMode(QtWidgets.QLineEdit.EchoMode.Password)
        layout.addWidget(self.password_edit)
        hint = QtWidgets.QLabel("Used for this connection only; never saved.")
        hint.setForegroundRole(QtGui.QPalette.ColorRole.PlaceholderText)
        layout.addWidget(hint)
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Ok | QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def password(self) -> str:
        """What was typed."""
        return self.password_edit.text()
