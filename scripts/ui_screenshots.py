"""Screenshots of the web view for the docs: the jobs table and a running job's page (replicas, a metric
plot, logs), made from real local jobs in a scratch state directory with Debian's chromium (headless).

    .venv/bin/python scripts/ui_screenshots.py            # writes docs/images/ui-jobs.png and ui-job.png
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "images"
sys.path.insert(0, str(ROOT))  # tests.support.browser: the one way kubetrain's tests start chromium

# Two workers of a small "training": loss and samples/s per step, a line per step; then they wait at a
# FIFO gate (so the job is Running when the picture is taken) and end when the script opens it.
TRAIN = """
import math, os, random, sys, time
import kubetrain.metrics as m
i = int(os.environ["KUBETRAIN_REPLICA_INDEX"])
rng = random.Random(i)
for step in range(60):
    loss = 2.3 * math.exp(-step / 18) + 0.08 + rng.random() * 0.05
    rate = 780 + 40 * i + rng.random() * 30
    m.log(step=step, loss=loss, samples_per_s=rate)
    print(f"step {step:3d}  loss {loss:.4f}  {rate:.0f} samples/s", flush=True)
    time.sleep(0.01)
if i == 1:
    print("<script>alert(1)</script>  (replica output is shown as text)", flush=True)
open(sys.argv[1] + f"-{i}").read()
print("done", flush=True)
"""


LOG_TEXT = "const l = document.getElementById('log'); return l ? l.textContent : ''"
JOBS_TEXT = "const t = document.getElementById('jobs'); return t ? t.innerText : ''"


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="kubetrain-ui-shots-"))
    os.environ["KUBETRAIN_HOME"] = str(scratch / "home")
    from selenium.webdriver.support.ui import WebDriverWait

    from kubetrain.backends.local.backend import LocalBackend
    from kubetrain.jobspec import from_dict
    from kubetrain.ui.server import Background
    from tests.support.browser import headless_chromium

    script = scratch / "train.py"
    script.write_text(TRAIN)
    gate = scratch / "gate"
    for i in range(2):
        os.mkfifo(f"{gate}-{i}")

    def doc(name: str, run: list[str], replicas: int, framework: str = "pytorch") -> dict[str, object]:
        return {
            "apiVersion": "kubetrain.dev/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name},
            "spec": {"framework": framework, "replicas": replicas, "run": {"exec": run}},
        }

    backend = LocalBackend(preload=())
    py = sys.executable
    backend.run(from_dict(doc("warmup", [py, "-c", "print('ok')"], 1, "generic")))
    backend.run(from_dict(doc("bad-lr", [py, "-c", "import sys; print('loss is nan at step 12'); sys.exit(3)"], 2)))
    job = backend.run(from_dict(doc("resnet-ddp", [py, str(script), str(gate)], 2)), detach=True).job_id

    try:
        with headless_chromium("--hide-scrollbars", window="1200,900") as driver, Background([backend]) as bg:
            driver.get(bg.address(f"/jobs/local/{job}"))
            WebDriverWait(driver, 60).until(
                lambda d: "step  59" in d.execute_script(LOG_TEXT),
                "the job's last step in the log",
            )
            WebDriverWait(driver, 30).until(
                lambda d: d.execute_script(
                    "return document.querySelectorAll('#metrics img.plot').length == 2 && "
                    "[...document.querySelectorAll('#metrics img.plot')].every(i => i.complete && i.naturalWidth)"
                )
            )
            driver.get(bg.url + "/")  # the page keeps the token of the first address for this origin
            WebDriverWait(driver, 30).until(
                lambda d: "resnet-ddp" in d.execute_script(JOBS_TEXT)
            )
            driver.set_window_size(1200, 420)
            driver.save_screenshot(str(OUT / "ui-jobs.png"))
            driver.set_window_size(1200, 1500)
            driver.get(bg.url + f"/jobs/local/{job}")
            WebDriverWait(driver, 30).until(
                lambda d: d.execute_script(
                    "return document.querySelectorAll('#metrics img.plot').length == 2 && "
                    "[...document.querySelectorAll('#metrics img.plot')].every(i => i.complete && i.naturalWidth) && "
                    "(document.getElementById('log') || {textContent: ''}).textContent.includes('step  59')"
                )
            )
            driver.save_screenshot(str(OUT / "ui-job.png"))
    finally:
        for i in range(2):
            fd = os.open(f"{gate}-{i}", os.O_WRONLY)
            os.close(fd)
        backend.close()
    print(f"wrote {OUT / 'ui-jobs.png'} and {OUT / 'ui-job.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
