"""What the scripts that run `toc serve` share: a free port, and waiting for it to answer."""

import socket
import time
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_up(base, proc, secs=30):
    """Waits until `base`/health answers; fails if the process ends or `secs` pass."""
    deadline = time.time() + secs
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"toc serve exited ({proc.returncode}) before it answered")
        try:
            urllib.request.urlopen(base + "/health", timeout=1)
            return
        except Exception:
            time.sleep(0.1)
    raise SystemExit("toc serve did not come up")
