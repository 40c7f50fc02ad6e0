"""Stand-in for a replica that serves until it is stopped (an `sshd -D` a launcher would reach): reports
that it started, then waits."""

from __future__ import annotations

import json
import os
import sys
import time

sys.stdout.write("CORPUS " + json.dumps({"serving": os.environ.get("KUBETRAIN_ROLE")}) + "\n")
sys.stdout.flush()
while True:
    time.sleep(3600)
