"""Print the KUBETRAIN_* variables this replica sees, as one line of JSON (keys sorted), and GREETING.

With --show-peers, also print one line per address in KUBETRAIN_CLUSTER: `peer <role> <index> <host:port>`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def addresses(cluster: dict[str, object]) -> list[tuple[str, int, str]]:
    """KUBETRAIN_CLUSTER holds, per role, a list of addresses or {count, address with `{index}`}."""
    out = []
    for role, entry in cluster.items():
        if isinstance(entry, list):
            out += [(role, i, str(addr)) for i, addr in enumerate(entry)]
        elif isinstance(entry, dict):
            pattern = str(entry["address"])
            out += [(role, i, pattern.replace("{index}", str(i))) for i in range(int(entry["count"]))]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show-peers", action="store_true")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k.startswith("KUBETRAIN_")}
    print(json.dumps(env, sort_keys=True, separators=(",", ":")), flush=True)
    print(f"greeting {os.environ.get('GREETING', '')}", flush=True)
    if args.show_peers:
        for role, index, address in addresses(json.loads(env.get("KUBETRAIN_CLUSTER", "{}"))):
            print(f"peer {role} {index} {address}", flush=True)
    return 0 if "KUBETRAIN_ROLE" in env else 1


if __name__ == "__main__":
    sys.exit(main())
