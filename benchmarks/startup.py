"""Start-up time of the CLI: `kubetrain --help` and `kubetrain version` (goal ≤ 0.15 s), median of 15."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from bytecode import compile_kubetrain  # beside this file

BIN = Path(sys.executable).parent / "kubetrain"


def median_time(argv: list[str], reps: int = 15) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


if __name__ == "__main__":
    compile_kubetrain()
    for args in (["--help"], ["version"], ["run", "--help"]):
        print(f"kubetrain {' '.join(args):<12} {median_time([str(BIN), *args]) * 1000:6.1f} ms")
