"""How long an agent waits on ``memlens hook``: ``python -m memlens.bench.hook [--runs N]``.

Runs the hook command ``N`` times on a realistic PostToolUse event (a Bash call) against a temporary store, and
``python -c pass`` as often, and prints both medians and their ratio. The hook runs as an agent runs it: a new
process each time, through the ``memlens`` console script when it sits next to this interpreter. To show where the
rest goes, it also times ``python -c "import memlens.hooks, memlens.store"`` (what the hook imports, and nothing
else: the hook minus this is reading the event, opening the store, writing and closing);
``python -X importtime -m memlens hook < event.json`` names each module's share.
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
from collections.abc import Mapping, Sequence
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


def run_seconds(command: Sequence[str], stdin: bytes = b"") -> float:
    """The wall time of one run of ``command`` (a new process), fed ``stdin``."""
    started = time.perf_counter()
    subprocess.run(command, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def median_seconds(commands: Mapping[str, Sequence[str]], runs: int, stdin: Mapping[str, bytes]) -> dict[str, float]:
    """The median wall time of ``runs`` runs of each command, taken in turns (one of each per round), so a machine
    that gets busier or quieter halfway weighs on every command alike."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(runs):
        for name, command in commands.items():
            data = stdin.get(name, b"").replace(b"bench-session", f"bench-session-{i}".encode())
            times[name].append(run_seconds(command, data))
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """Print the median time of the hook and of ``python -c pass``, and their ratio."""
    parser = argparse.ArgumentParser(prog="python -m memlens.bench.hook", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="how many runs of each (default 20)")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="memlens-hook-bench-"))
    try:
        store = folder / "memory.db"
        commands = {
            "hook": hook_command(store),
            "pass": [sys.executable, "-c", "pass"],
            "imports": [sys.executable, "-c", "import memlens.hooks, memlens.store"],
        }
        payload = json.dumps(EVENT).encode()
        run_seconds(commands["hook"], payload)  # creates the store: the first run of a real agent is not what it waits on
        medians = median_seconds(commands, args.runs, {"hook": payload})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    hook, baseline = medians["hook"], medians["pass"]
    print(f"memlens hook      median {hook * 1000:7.1f} ms over {args.runs} runs ({commands['hook'][0]} ... hook)")
    print(f"python -c pass    median {baseline * 1000:7.1f} ms over {args.runs} runs")
    imports = medians["imports"]
    print(f"the hook's imports median {imports * 1000:6.1f} ms over {args.runs} runs (python -c 'import memlens.hooks, memlens.store')")
    print(f"the hook's work   about  {(hook - imports) * 1000:7.1f} ms (reading the event, opening the store, writing, closing)")
    print(f"ratio             {hook / baseline:7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
