"""Screenshots of the web view for the docs: the jobs table (60 jobs, a page of 25), a running job's page
(replicas, metric plots, the log with timestamps and a line linked), and the jobs table on a 390 px phone,
made from real local jobs in a scratch state directory with Debian's chromium (headless).

    .venv/bin/python scripts/ui_screenshots.py    # writes docs/images/ui-jobs.png, ui-job.png, ui-phone.png
"""

from __future__ import annotations

import json
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
    from kubetrain.status import JobPhase
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
    spec = json.dumps(doc("sweep", [py, "-c", "pass"], 2))
    for n in range(56):  # a sweep recorded earlier (as `run` records jobs), ended in various ways
        phase = (JobPhase.SUCCEEDED, JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.CANCELLED)[n % 4]
        backend.store.create_job(f"sweep-lr-{n:02d}", "local", spec, None, [("worker", 0), ("worker", 1)], phase=phase)
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
            driver.get(bg.url + "/?per=25")  # the page keeps the token of the first address for this origin
            WebDriverWait(driver, 30).until(lambda d: "resnet-ddp" in d.execute_script(JOBS_TEXT))
            driver.set_window_size(1200, 760)
            driver.save_screenshot(str(OUT / "ui-jobs.png"))
            driver.set_window_size(1200, 1500)
            driver.get(bg.url + f"/jobs/local/{job}?ts=1#L97")
            WebDriverWait(driver, 30).until(
                lambda d: d.execute_script(
                    "return document.querySelectorAll('#metrics img.plot').length == 2 && "
                    "[...document.querySelectorAll('#metrics img.plot')].every(i => i.complete && i.naturalWidth) && "
                    "!!document.querySelector('#log .ln.sel')"
                )
            )
            driver.execute_script("window.scrollTo(0, 0)")
            driver.save_screenshot(str(OUT / "ui-job.png"))
            phone = {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", phone)
            driver.get(bg.url + "/?per=25&sort=name&dir=asc")
            WebDriverWait(driver, 30).until(lambda d: "bad-lr" in d.execute_script(JOBS_TEXT))
            driver.save_screenshot(str(OUT / "ui-phone.png"))
    finally:
        for i in range(2):
            fd = os.open(f"{gate}-{i}", os.O_WRONLY)
            os.close(fd)
        backend.close()
    print(f"wrote {OUT / 'ui-jobs.png'}, {OUT / 'ui-job.png'} and {OUT / 'ui-phone.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
