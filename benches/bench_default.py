"""How long ``kvbudget`` with no arguments takes, against ``python -c pass`` measured in the same run.

The embedded default plans gpt-oss-120b with its EAGLE3 draft on one H200 in SGLang 0.5.23
and vLLM 0.33.0 side by side (issue 23: under 0.3 s). Run:
``python benches/bench_default.py [N]`` (default N = 15). Each command runs N times in a
fresh interpreter, the two interleaved so that the machine's drift hits both; the report
gives the best and the median of each, in milliseconds, and the ratio of the default's
best to the baseline's. The exit status is 1 when the default's best is over the bound.
The console script next to this interpreter is timed (``python -m kvbudget.cli`` when
there is none), with stdout to /dev/null (rich renders as for a pipe, 120 columns).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BOUND_S = 0.3


def _command() -> list[str]:
    script = Path(sys.executable).with_name("kvbudget")
    return [str(script)] if script.exists() else [sys.executable, "-m", "kvbudget.cli"]


def _once(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "NO_COLOR": "1"})
    return time.perf_counter() - t0


def main(n: int) -> int:
    base_cmd, default_cmd = [sys.executable, "-c", "pass"], _command()
    _once(default_cmd)  # warm the file cache and the bytecode
    base, default = [], []
    for _ in range(n):
        base.append(_once(base_cmd))
        default.append(_once(default_cmd))
    for name, xs in (("python -c pass", base), ("kvbudget (no arguments)", default)):
        print(f"{name:28s}: best {min(xs) * 1e3:7.1f} ms, median {statistics.median(xs) * 1e3:7.1f} ms")
    ratio = min(default) / min(base)
    print(f"ratio (best / best)         : {ratio:7.1f}x the interpreter's start")
    print(f"bound                       : {BOUND_S * 1e3:7.1f} ms -> {'ok' if min(default) <= BOUND_S else 'OVER'}")
    return 0 if min(default) <= BOUND_S else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 15))
