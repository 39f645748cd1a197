"""A real `git daemon` on 127.0.0.1, serving the repositories of one folder read-only over
git://, for tests of workspaces given by URL (no network beyond this machine)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support.ray_cluster import free_port


@contextlib.contextmanager
def serve_git(served: Path) -> Iterator[str]:
    """Serve every repository under `served`; yields the base URL (add `/<folder name>`)."""
    port = free_port()
    daemon = subprocess.Popen(
        ["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={served}",
         "--listen=127.0.0.1", f"--port={port}", str(served)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or daemon.poll() is not None:
                    raise RuntimeError("git daemon did not start") from None
                time.sleep(0.1)
        yield f"git://127.0.0.1:{port}"
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)
