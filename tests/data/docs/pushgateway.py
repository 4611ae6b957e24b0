"""A Prometheus Pushgateway on 127.0.0.1:9091 for docs/how-to/observe.md.

``python pushgateway.py start`` starts Debian's ``prometheus-pushgateway`` in a
session of its own, writes its process group to ``pushgateway.pid`` and returns
once it answers; ``python pushgateway.py stop`` stops it and returns once the
port refuses connections again, as the page's next example expects.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

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
    process = subprocess.Popen(
        [binary, f"--web.listen-address={ADDRESS[0]}:{ADDRESS[1]}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    PID_FILE.write_text(str(process.pid))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://{ADDRESS[0]}:{ADDRESS[1]}/-/ready", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    sys.exit("the Pushgateway did not become ready")


def stop() -> None:
    os.killpg(int(PID_FILE.read_text()), signal.SIGTERM)
    PID_FILE.unlink()
    deadline = time.monotonic() + 10
    while _answers():
        if time.monotonic() > deadline:
            sys.exit("the Pushgateway did not stop")
        time.sleep(0.1)


if __name__ == "__main__":
    {"start": start, "stop": stop}[sys.argv[1]]()
