"""How long an agent waits on ``memlens hook``: ``python -m memlens.bench.hook [--runs N]``.

Runs the hook command ``N`` times on a realistic PostToolUse event (a Bash call) against a temporary store, and
``python -c pass`` as often, and prints both medians and their ratio. The hook runs as an agent runs it: a new
process each time, through the ``memlens`` console script when it sits next to this interpreter.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

EVENT = {
    "session_id": "bench-session",
    "hook_event_name": "PostToolUse",
    "cwd": "/tmp",
    "tool_name": "Bash",
    "tool_input": {"command": "pytest -q tests/test_login.py", "description": "run the login tests"},
    "tool_response": {"stdout": "...\n3 passed in 0.12s\n", "stderr": "", "interrupted": False, "isImage": False},
}


def hook_command(store: Path) -> list[str]:
    """The hook's command line: the ``memlens`` script beside this interpreter, else ``python -m memlens``."""
    script = Path(sys.executable).with_name("memlens")
    base = [str(script)] if script.exists() else [sys.executable, "-m", "memlens"]
    return [*base, "--db", str(store), "hook"]


def median_seconds(command: Sequence[str], runs: int, stdin: bytes = b"") -> float:
    """The median wall time of ``runs`` runs of ``command`` (a new process each), fed ``stdin``."""
    times: list[float] = []
    for i in range(runs):
        data = stdin.replace(b"bench-session", f"bench-session-{i}".encode()) if stdin else stdin
        started = time.perf_counter()
        subprocess.run(command, input=data, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the median time of the hook and of ``python -c pass``, and their ratio."""
    parser = argparse.ArgumentParser(prog="python -m memlens.bench.hook", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="how many runs of each (default 20)")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="memlens-hook-bench-"))
    try:
        store = folder / "memory.db"
        command = hook_command(store)
        payload = json.dumps(EVENT).encode()
        median_seconds(command, 1, payload)  # creates the store: the first run of a real agent is not what it waits on
        hook = median_seconds(command, args.runs, payload)
        baseline = median_seconds([sys.executable, "-c", "pass"], args.runs)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"memlens hook      median {hook * 1000:7.1f} ms over {args.runs} runs ({' '.join(command[:1])} ... hook)")
    print(f"python -c pass    median {baseline * 1000:7.1f} ms over {args.runs} runs")
    print(f"ratio             {hook / baseline:7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
