"""kubetrain's local backend against `torchrun --standalone`, in the same run, as ratios.

    python benchmarks/launch.py [--reps 5] [--sizes 1,2,4,8] [--skip-throughput]

1. Launch: wall time of a trivial gloo job (init, one all_reduce, barrier, exit) for N processes:
   `kubetrain run --framework pytorch --replicas N -- python trivial.py` versus
   `torchrun --standalone --nproc-per-node N trivial.py`, runs interleaved, medians. The third column is
   kubetrain with `--preload none` (every replica imports torch itself), to show what preloading buys.
2. Failure: N=2, rank 1 exits 1 two seconds after init while rank 0 waits; time from that exit to the
   launcher having returned (every process stopped).
3. Throughput: DDP samples/s of a 1.05M-parameter MLP over gloo, N=2.
Numbers drift between machines: compare the ratios. Timed assertions do not belong in tests; this is
where speed is measured.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / "workloads"
BIN = Path(sys.executable).parent


def kubetrain(n: int, script: str, *args: str, preload: bool = True) -> list[str]:
    return [str(BIN / "kubetrain"), "run", "-q", "--framework", "pytorch", "--replicas", str(n),
            *([] if preload else ["--preload", "none"]), "--", "python", str(WORK / script), *args]


def torchrun(n: int, script: str, *args: str) -> list[str]:
    return [str(BIN / "torchrun"), "--standalone", f"--nproc-per-node={n}", str(WORK / script), *args]


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return time.perf_counter() - start, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--sizes", default="1,2,4,8")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="kubetrain-bench-")
    env = {**os.environ, "KUBETRAIN_HOME": home, "PYTHONWARNINGS": "ignore"}
    print(f"kubetrain vs torchrun --standalone; medians of {args.reps} interleaved runs\n")

    print("1. launch: trivial gloo job (init, all_reduce, barrier, exit)")
    print(f"{'N':>3} {'kubetrain':>10} {'torchrun':>10} {'ratio':>7} {'no preload':>11} {'ratio':>7}")
    for n in (int(s) for s in args.sizes.split(",")):
        ours, theirs, plain = [], [], []
        for _ in range(args.reps):
            ours.append(timed(kubetrain(n, "trivial.py"), env)[0])
            theirs.append(timed(torchrun(n, "trivial.py"), env)[0])
            plain.append(timed(kubetrain(n, "trivial.py", preload=False), env)[0])
        a, b, c = statistics.median(ours), statistics.median(theirs), statistics.median(plain)
        print(f"{n:>3} {a:>9.2f}s {b:>9.2f}s {a / b:>7.2f} {c:>10.2f}s {c / b:>7.2f}", flush=True)

    print("\n2. failure: rank 1 exits 1 after 2 s (N=2); exit → launcher returned")
    print(f"{'':>3} {'kubetrain':>10} {'torchrun':>10} {'ratio':>7}")
    ours, theirs = [], []
    for _ in range(args.reps):
        for runner, out in ((kubetrain, ours), (torchrun, theirs)):
            stamp = Path(home) / "fail-stamp"
            stamp.unlink(missing_ok=True)
            proc = subprocess.run(runner(2, "fail.py"), env={**env, "FAIL_STAMP": str(stamp)},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            end = time.time()
            assert proc.returncode != 0, "the failing job must fail"
            out.append(end - float(stamp.read_text()))
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"{'':>3} {a:>9.2f}s {b:>9.2f}s {a / b:>7.2f}", flush=True)

    if not args.skip_throughput:
        print("\n3. throughput: DDP MLP 1.05M params, batch 64, 200 steps, N=2 (samples/s)")
        ours_t: list[float] = []
        theirs_t: list[float] = []
        for _ in range(max(3, args.reps // 2)):
            for runner, out in ((kubetrain, ours_t), (torchrun, theirs_t)):
                _, text = timed(runner(2, "mlp.py"), env)
                m = re.search(r"samples/s (\d+)", text)
                assert m, text[-2000:]
                out.append(float(m.group(1)))
        a, b = statistics.median(ours_t), statistics.median(theirs_t)
        print(f"{'':>3} {a:>10.0f} {b:>10.0f} {a / b:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
