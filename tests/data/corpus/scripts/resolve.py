"""Stand-in for a replica that reaches a peer by the name its job file gives it (a JobSet's
`<jobset>-<job>-0-0.<subdomain>`): resolves each name and reports the addresses; exits 1 if one does not
resolve, as the ping or connect of the example would fail."""

from __future__ import annotations

import json
import socket
import sys


def main() -> int:
    found = {}
    for name in sys.argv[1:]:
        try:
            found[name] = sorted({info[4][0] for info in socket.getaddrinfo(name, None, socket.AF_INET)})
        except OSError as exc:
            print(f"cannot resolve {name}: {exc}", file=sys.stderr, flush=True)
            return 1
    sys.stdout.write("CORPUS " + json.dumps({"resolved": found}, sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
