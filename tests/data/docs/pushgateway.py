"""A Prometheus Pushgateway on 127.0.0.1:9091 for docs/how-to/observe.md.

``python pushgateway.py start`` starts Debian's ``prometheus-pushgateway`` in a
session of its own, writes its process group to ``pushgateway.pid`` and returns
once it answers; ``python pushgateway.py stop`` stops it and returns once the
port refuses connections again, as the page's next example expects.
"""

from __future__ import annotations

import shutil
import socket
import sys
import time
import urllib.request
from pathlib import Path

import background

ADDRESS = ("127.0.0.1", 9091)
PID_FILE = Path("pushgateway.pid")


def _answers() -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(ADDRESS) == 0


def start() -> None:
    binary = shutil.which("prometheus-pushgateway")
    if binary is None:
        sys.exit("prometheus-pushgateway is not installed")
    if _answers():
        sys.exit(f"something already listens on {ADDRESS[0]}:{ADDRESS[1]}")
    background.start(
        [binary, f"--web.listen-address={ADDRESS[0]}:{ADDRESS[1]}"],
        PID_FILE,
        _ready,
        "the Pushgateway",
    )


def _ready() -> bool:
    try:
        with urllib.request.urlopen(f"http://{ADDRESS[0]}:{ADDRESS[1]}/-/ready", timeout=1):
            return True
    except OSError:
        return False


def stop() -> None:
    background.stop(PID_FILE)
    deadline = time.monotonic() + 10
    while _answers():
        if time.monotonic() > deadline:
            sys.exit("the Pushgateway did not stop")
        time.sleep(0.1)


if __name__ == "__main__":
    {"start": start, "stop": stop}[sys.argv[1]]()
