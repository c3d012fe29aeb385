"""How long an agent waits on ``memlens hook``: ``python -m memlens.bench.hook [--runs N]``.

Runs the hook command ``N`` times on a realistic PostToolUse event (a Bash call) against a temporary store, and
``python -c pass`` as often, and prints the medians and their ratios. The hook runs as an agent runs it: a new
process each time, through the ``memlens`` console script when it sits next to this interpreter. Two forms are
timed: ``memlens hook`` as installed, which hands the write to a detached child and exits (what the agent waits
for; the benchmark waits for the child untimed before the next run, so children do not pile up), and
``memlens hook --wait``, which records the event before it exits (the full write). To show where the rest of the
full write goes, it also times ``python -c "import memlens.hooks, memlens.store"`` (what the write imports, and
nothing else: the full write minus this is reading the event, opening the store, writing and closing);
``python -X importtime -m memlens hook --wait < event.json`` names each module's share.
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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from memlens.hook_detach import wait_for_queue

EVENT = {
    "session_id": "bench-session",
    "hook_event_name": "PostToolUse",
    "cwd": "/tmp",
    "tool_name": "Bash",
    "tool_input": {"command": "pytest -q tests/test_login.py", "description": "run the login tests"},
    "tool_response": {"stdout": "...\n3 passed in 0.12s\n", "stderr": "", "interrupted": False, "isImage": False},
}


def hook_command(store: Path, *, wait: bool = False) -> list[str]:
    """The hook's command line: the ``memlens`` script beside this interpreter, else ``python -m memlens``."""
    script = Path(sys.executable).with_name("memlens")
    base = [str(script)] if script.exists() else [sys.executable, "-m", "memlens"]
    return [*base, "--db", str(store), "hook", *(["--wait"] if wait else [])]


def run_seconds(command: Sequence[str], stdin: bytes = b"") -> float:
    """The wall time of one run of ``command`` (a new process), fed ``stdin``."""
    started = time.perf_counter()
    subprocess.run(command, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def median_seconds(
    commands: Mapping[str, Sequence[str]], runs: int, stdin: Mapping[str, bytes], after: Mapping[str, Callable[[], object]] | None = None
) -> dict[str, float]:
    """The median wall time of ``runs`` runs of each command, taken in turns (one of each per round), so a machine
    that gets busier or quieter halfway weighs on every command alike. ``after[name]`` runs, untimed, after each
    run of that command."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(runs):
        for name, command in commands.items():
            data = stdin.get(name, b"").replace(b"bench-session", f"bench-session-{i}".encode())
            times[name].append(run_seconds(command, data))
            if after and name in after:
                after[name]()
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """Print the median time of the hook (detached, and with --wait) and of ``python -c pass``, and the ratios."""
    parser = argparse.ArgumentParser(prog="python -m memlens.bench.hook", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="how many runs of each (default 20)")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="memlens-hook-bench-"))
    try:
        store = folder / "memory.db"
        commands = {
            "hook": hook_command(store),
            "wait": hook_command(store, wait=True),
            "pass": [sys.executable, "-c", "pass"],
            "imports": [sys.executable, "-c", "import memlens.hooks, memlens.store"],
        }
        payload = json.dumps(EVENT).encode()
        run_seconds(commands["wait"], payload)  # creates the store: the first run of a real agent is not what it waits on
        # Each --wait run gets its own session too: the same event again within minutes is a duplicate, not a write.
        wait_payload = payload.replace(b"bench-session", b"bench-session-wait")
        medians = median_seconds(commands, args.runs, {"hook": payload, "wait": wait_payload}, after={"hook": lambda: wait_for_queue(str(folder))})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    hook, full, baseline, imports = medians["hook"], medians["wait"], medians["pass"], medians["imports"]
    print(f"memlens hook         median {hook * 1000:7.1f} ms over {args.runs} runs (what the agent waits for: {commands['hook'][0]} ... hook)")
    print(f"memlens hook --wait  median {full * 1000:7.1f} ms over {args.runs} runs (the full write, done before the command exits)")
    print(f"python -c pass       median {baseline * 1000:7.1f} ms over {args.runs} runs")
    print(f"the write's imports  median {imports * 1000:7.1f} ms over {args.runs} runs (python -c 'import memlens.hooks, memlens.store')")
    print(f"the write's own work about  {(full - imports) * 1000:7.1f} ms (reading the event, opening the store, writing, closing)")
    print(f"ratio, hook          {hook / baseline:7.2f}x python -c pass")
    print(f"ratio, hook --wait   {full / baseline:7.2f}x python -c pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
