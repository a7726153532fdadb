"""Fuzz llmcap's input handling with real subprocesses: no traceback, bounded time and memory.

Runs N mutated specs through `llmcap search validate` and N mutated `llmcap simulate` command
lines (tests/search/input_mutations.py makes them), each as its own process with a wall-clock
limit, and counts:

- tracebacks (any "Traceback" in the output, or an exit status other than 0 and 2),
- exit 2 without an error message,
- timeouts (over --timeout seconds, default 60),
- over-memory runs (peak RSS over --max-rss-mb, default 1024, read from the child's rusage).

    .venv/bin/python benchmarks/fuzz_inputs.py             # 1,000 of each
    .venv/bin/python benchmarks/fuzz_inputs.py -n 100 -j 2

Exit status 1 when any case failed; the failing command lines are printed.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.search.input_mutations import (  # noqa: E402
    fill,
    mutate_spec,
    prepare_scratch,
    simulate_args,
)

LLMCAP = [sys.executable, "-c", "from search.cli import main; main()"]


@dataclass(slots=True)
class Outcome:
    kind: str  # "spec" or "simulate"
    seed: int
    args: list[str]
    exit_code: int | None  # None: killed at the time limit
    seconds: float
    peak_rss_mb: float
    output: str

    def problems(self, max_rss_mb: float) -> list[str]:
        found = []
        if self.exit_code is None:
            found.append("timeout")
        elif self.exit_code not in (0, 2) or "Traceback" in self.output:
            found.append("traceback")
        elif self.exit_code == 2 and "rror" not in self.output:
            found.append("no message")
        if self.peak_rss_mb > max_rss_mb:
            found.append("over memory")
        return found


def run_case(args: list[str], timeout_s: float) -> tuple[int | None, float, float, str]:
    """Run llmcap with ``args``; (exit code or None on timeout, seconds, peak RSS MB, output)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryFile() as out:
        started = time.monotonic()
        process = subprocess.Popen(
            [*LLMCAP, *args], stdout=out, stderr=subprocess.STDOUT, env=env,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        exit_code: int | None = None
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                exit_code = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() - started > timeout_s:
                os.killpg(process.pid, signal.SIGKILL)
                _, _, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.02)
        process.returncode = -1  # reaped here, not by Popen
        seconds = time.monotonic() - started
        out.seek(0)
        output = out.read().decode("utf-8", "replace")
    return exit_code, seconds, usage.ru_maxrss / 1024, output


def spec_case(seed: int, scratch: Path, timeout_s: float) -> Outcome:
    rng = random.Random(seed)
    folder = scratch / f"spec-{seed}"
    folder.mkdir()
    spec = folder / "spec.yaml"
    spec.write_bytes(mutate_spec(rng))
    args = ["search", "validate", str(spec)]
    return Outcome("spec", seed, args, *run_case(args, timeout_s))


def simulate_case(seed: int, scratch: Path, timeout_s: float) -> Outcome:
    rng = random.Random(10**6 + seed)
    folder = scratch / f"simulate-{seed}"
    folder.mkdir()
    prepare_scratch(folder, rng)
    args = fill(simulate_args(rng), folder)
    return Outcome("simulate", seed, args, *run_case(args, timeout_s))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000, help="cases of each kind [1000]")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="processes at once [2]")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case [60]")
    parser.add_argument("--max-rss-mb", type=float, default=1024.0, help="peak RSS [1024]")
    options = parser.parse_args()

    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="llmcap-fuzz-") as tmp,
        ThreadPoolExecutor(options.jobs) as pool,
    ):
        scratch = Path(tmp)
        futures = [pool.submit(spec_case, s, scratch, options.timeout) for s in range(options.n)]
        futures += [
            pool.submit(simulate_case, s, scratch, options.timeout) for s in range(options.n)
        ]
        outcomes = [f.result() for f in futures]
    report(outcomes, options.max_rss_mb, time.monotonic() - started)
    return 1 if any(o.problems(options.max_rss_mb) for o in outcomes) else 0


def report(outcomes: list[Outcome], max_rss_mb: float, wall_s: float) -> None:
    for kind in ("spec", "simulate"):
        mine = [o for o in outcomes if o.kind == kind]
        if not mine:
            continue
        exits = Counter(o.exit_code for o in mine)
        problems = Counter(p for o in mine for p in o.problems(max_rss_mb))
        slowest = max(mine, key=lambda o: o.seconds)
        largest = max(mine, key=lambda o: o.peak_rss_mb)
        print(
            f"{kind}: {len(mine)} cases; exit 0: {exits.get(0, 0)}, exit 2: {exits.get(2, 0)}; "
            f"tracebacks {problems['traceback']}, timeouts {problems['timeout']}, "
            f"over memory {problems['over memory']}, exit 2 without message "
            f"{problems['no message']}; slowest {slowest.seconds:.1f} s, "
            f"largest peak RSS {largest.peak_rss_mb:.0f} MB"
        )
    for o in outcomes:
        found = o.problems(max_rss_mb)
        if found:
            shown = " ".join(shlex.quote(a if len(a) < 80 else a[:40] + "...") for a in o.args)
            print(f"\n{', '.join(found)}: llmcap {shown}\n{o.output[-1500:]}")
    print(f"wall time {wall_s:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
