"""Screenshots of the web view's interactive plot for the docs: a running job's loss (two ranks, smoothed,
hovered), two jobs compared on one plot, and a restarted job's attempts apart; made from real local jobs in
a scratch state directory with Debian's chromium (headless).

    .venv/bin/python scripts/ui_plot_screenshots.py   # writes docs/images/ui-plot-{running,compare,restarts}.png
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "images"
sys.path.insert(0, str(ROOT))  # tests.support.browser: the one way kubetrain's tests start chromium

# Two ranks training; they wait at a FIFO gate once done, so the job is Running when the picture is taken.
TRAIN = """
import math, os, random, sys
import kubetrain.metrics as m
i = int(os.environ["KUBETRAIN_REPLICA_INDEX"])
lr = float(sys.argv[2])
rng = random.Random(i)
for step in range(300):
    m.log(step=step, loss=2.3 * math.exp(-step * lr) + 0.1 + rng.random() * 0.15)
if sys.argv[1] != "-":
    open(sys.argv[1] + f"-{i}").read()
"""

# Fails once at step 120 (a marker file says it already did), then runs to step 300 from its checkpoint, 100.
RESTARTS = """
import math, os, random, sys, time
import kubetrain.metrics as m
marker = sys.argv[1]
first = not os.path.exists(marker)
open(marker, "a").close()
rng = random.Random(first)
for step in range(0 if first else 100, 120 if first else 300):
    m.log(step=step, loss=2.3 * math.exp(-step / 80) + 0.1 + rng.random() * 0.1)
    time.sleep(0.002)
sys.exit(3 if first else 0)
"""

LOADED = "return !!document.querySelector('#explore-plot[data-loaded] .u-over')"


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="kubetrain-ui-plot-shots-"))
    os.environ["KUBETRAIN_HOME"] = str(scratch / "home")
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait

    from kubetrain.backends.local.backend import LocalBackend
    from kubetrain.jobspec import from_dict
    from kubetrain.ui.server import Background
    from tests.support.browser import headless_chromium

    (scratch / "train.py").write_text(TRAIN)
    (scratch / "restarts.py").write_text(RESTARTS)
    gate = scratch / "gate"
    for i in range(2):
        os.mkfifo(f"{gate}-{i}")

    def doc(name: str, run: list[str], replicas: int, **spec: object) -> dict[str, object]:
        return {
            "apiVersion": "kubetrain.dev/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name},
            "spec": {"framework": "generic", "replicas": replicas, "run": {"exec": run}, **spec},
        }

    backend = LocalBackend(preload=())
    py, train = sys.executable, str(scratch / "train.py")
    running = backend.run(from_dict(doc("resnet-ddp", [py, train, str(gate), "0.02"], 2)), detach=True).job_id
    slow = backend.run(from_dict(doc("lr-5e-3", [py, train, "-", "0.005"], 2))).job_id
    fast = backend.run(from_dict(doc("lr-2e-2", [py, train, "-", "0.02"], 2))).job_id
    restart = [py, str(scratch / "restarts.py"), str(scratch / "marker")]
    restarted = backend.run(from_dict(doc("resumed", restart, 1, runPolicy={"backoffLimit": 1}))).job_id

    def shot(driver: object, path: str, name: str) -> None:
        driver.get(path)  # type: ignore[attr-defined]
        WebDriverWait(driver, 60).until(lambda d: d.execute_script(LOADED), "the interactive plot")
        driver.execute_script("document.getElementById('explore').scrollIntoView()")  # type: ignore[attr-defined]
        box = driver.find_element("css selector", "#explore-plot .u-over")  # type: ignore[attr-defined]
        ActionChains(driver).move_to_element_with_offset(box, box.size["width"] // 3, 0).perform()
        driver.find_element("id", "explore").screenshot(str(OUT / name))  # type: ignore[attr-defined]

    try:
        with headless_chromium("--hide-scrollbars", window="1100,1200") as driver, Background([backend]) as bg:
            driver.get(bg.address("/"))
            WebDriverWait(driver, 30).until(lambda d: d.find_elements("css selector", "#job-rows tr"))
            shot(driver, bg.url + f"/jobs/local/{running}?plot=loss&smooth=0.8", "ui-plot-running.png")
            shot(driver, bg.url + f"/jobs/local/{fast}?plot=loss&ranks=mean&with={slow}", "ui-plot-compare.png")
            shot(driver, bg.url + f"/jobs/local/{restarted}?plot=loss&ex=relative&attempts=all", "ui-plot-restarts.png")
    finally:
        for i in range(2):
            os.close(os.open(f"{gate}-{i}", os.O_WRONLY))
        with contextlib.suppress(Exception):  # the pictures are taken: the running job is not left behind
            backend.cancel(running)
        backend.close()
    print(f"wrote {OUT}/ui-plot-running.png, ui-plot-compare.png and ui-plot-restarts.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
