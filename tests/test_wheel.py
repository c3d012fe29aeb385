"""memlens as users install it: build the wheel, install it into a fresh virtual environment, start the CLI, the
app (offscreen) and the MCP server from there.

The editable checkout hides missing package data (the app once crashed on a missing style.qss in the wheel) and a
generic top-level name (the wheel once installed packages named ``core`` and ``gui``). The fresh environment gets the
wheel without its dependencies, and sees this environment's packages (PySide6, mcp, numpy) through a .pth line:
that keeps the test offline and fast, and the memlens it runs is the wheel's, which the test checks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "core", "gui", "resources")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the sources (a build in the checkout would leave build/ behind)."""
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "screenshots"))
        else:
            shutil.copy2(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
        text=True,
    )
    # setuptools warns that a data folder missing from `packages` will no longer be shipped: the wheel would lose
    # it (and the app its icons) on the day that warning becomes the rule.
    assert "absent from the `packages` configuration" not in build.stdout + build.stderr
    (built,) = out.glob("memlens-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_env(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment holding the wheel; returns its bin folder."""
    home = tmp_path_factory.mktemp("venv")
    venv.create(home, with_pip=False)
    python = home / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        text=True,
    )
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True, capture_output=True, text=True)
    # The dependencies, from this environment: a plain path line adds the folder without running its .pth files,
    # so this environment's editable memlens stays out of the fresh one.
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site.stdout.strip(), "memlens-test-deps.pth").write_text("\n".join(sorted(deps)) + "\n", encoding="utf-8")
    return home / "bin"


def run(bin_dir: Path, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **env}
    environment.pop("PYTHONPATH", None)
    return subprocess.run([str(bin_dir / args[0]), *args[1:]], cwd=cwd, env=environment, capture_output=True, text=True, timeout=120)


def test_the_wheel_holds_one_package_and_every_resource(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {"memlens"}, top
    shipped = {p.relative_to(ROOT / "resources").as_posix() for p in (ROOT / "resources").rglob("*") if p.is_file()}
    needed = {n for n in shipped if n == "style.qss" or n.startswith("icons/")}
    assert needed and {f"memlens/resources/{n}" for n in needed} <= names
    assert not any(n.startswith("memlens/resources/screenshots/") for n in names)  # README pictures stay out
    assert "memlens/py.typed" in names
    # Every module of the checkout is in the wheel: a new package folder must be listed in pyproject.toml.
    sources = {f"memlens/{p.relative_to(ROOT / 'core').as_posix()}" for p in (ROOT / "core").rglob("*.py")}
    sources |= {f"memlens/gui/{p.relative_to(ROOT / 'gui').as_posix()}" for p in (ROOT / "gui").rglob("*.py")}
    assert sources - names == set()


def test_the_installed_cli_app_and_mcp_server_run(fresh_env: Path, tmp_path: Path) -> None:
    where = run(fresh_env, "python", "-c", "import memlens, memlens.gui; print(memlens.__file__)", cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    assert where.stdout.startswith(str(fresh_env.parent)), where.stdout  # the wheel's memlens, not the checkout's
    assert run(fresh_env, "python", "-c", "import core", cwd=tmp_path).returncode != 0
    assert run(fresh_env, "python", "-c", "import gui", cwd=tmp_path).returncode != 0

    version = run(fresh_env, "memlens", "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("memlens "), version

    store = tmp_path / "store" / "memory.db"
    assert run(fresh_env, "memlens", "--db", str(store), "remember", "The wheel test ran here", cwd=tmp_path).returncode == 0
    app = run(fresh_env, "memlens", "--db", str(store), "gui", "--check", cwd=tmp_path, QT_QPA_PLATFORM="offscreen")
    assert app.returncode == 0, app.stderr
    assert "showed 1 rows" in app.stdout
    assert "Traceback" not in app.stderr

    anyio = pytest.importorskip("anyio")
    pytest.importorskip("mcp")
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=str(fresh_env / "memlens"), args=["mcp", "--db", str(store)], cwd=str(tmp_path))

    async def talk() -> Any:
        with anyio.fail_after(60):
            async with Client(params, read_timeout_seconds=60) as client:
                return await client.call_tool("recall", {"query": "wheel test"})

    result = anyio.run(talk)
    assert "The wheel test ran here" in " ".join(getattr(block, "text", "") for block in result.content)
