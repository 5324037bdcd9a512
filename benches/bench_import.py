"""How long ``import kvbudget`` takes in a fresh interpreter, against ``python -c pass``.

Run: ``python benches/bench_import.py``. Reports the best of N runs of each and the
difference (the cost of importing kvbudget), in milliseconds.
"""

from __future__ import annotations

import subprocess
import sys
import time


def best_of(code: str, n: int = 15) -> float:
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        best = min(best, time.perf_counter() - t0)
    return best


if __name__ == "__main__":
    base = best_of("pass")
    kv = best_of("import kvbudget")
    print(f"python -c pass      : {base * 1e3:7.1f} ms")
    print(f"import kvbudget     : {kv * 1e3:7.1f} ms")
    print(f"cost of the import  : {(kv - base) * 1e3:7.1f} ms")
