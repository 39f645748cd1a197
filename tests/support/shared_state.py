"""Drivers for the swarm's shared-state tests: a real `redis-server` on a free local port, and
the functions run in separate processes against one SQLite file or one directory."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REDIS_MISSING = (
    "redis-server is not on PATH (Debian package redis-server, installed by .ci/run); "
    "the Redis persistence tests need a real server"
)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def redis_server(attempts: int = 5, wait_s: float = 15.0) -> Iterator[str]:
    """A throwaway redis-server on 127.0.0.1 (no persistence to disk); yields its url and
    stops it at the end. Retries on another port if the chosen one was taken meanwhile."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise FileNotFoundError(REDIS_MISSING)
    import redis

    for _ in range(attempts):
        port = free_port()
        with tempfile.TemporaryDirectory(prefix="jm-redis-") as workdir:
            process = subprocess.Popen(
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", workdir, "--protected-mode", "yes"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                url = f"redis://127.0.0.1:{port}/0"
                client = redis.Redis.from_url(url, socket_connect_timeout=0.5)
                deadline = time.monotonic() + wait_s
                ready = False
                while time.monotonic() < deadline and process.poll() is None:
                    try:
                        ready = bool(client.ping())
                        break
                    except redis.ConnectionError:
                        time.sleep(0.05)
                client.close()
                if ready:
                    yield url
                    return
            finally:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    raise RuntimeError(f"redis-server did not start on a free port after {attempts} attempts")


# --- run in child processes (module-level so the spawn start method can import them) --------


def sqlite_writer(path: str, worker: int, keys: int, increments: int) -> None:
    """Save `keys` keys of its own, overwrite one shared key, and increment a shared counter."""
    from journeyman.swarm.shared import SQLitePersistenceAdapter

    with SQLitePersistenceAdapter(path) as store:
        for i in range(keys):
            store.save(f"p{worker}/k{i}", {"worker": worker, "i": i, "pad": "x" * 200})
            store.save("last", {"worker": worker, "i": i})
            if i < increments:
                store.update("counter", lambda v: {"n": (v or {"n": 0})["n"] + 1})


def sqlite_reader(path: str, rounds: int) -> int:
    """Load what the writers wrote while they write; every object read must be whole."""
    from journeyman.swarm.shared import SQLitePersistenceAdapter

    seen = 0
    with SQLitePersistenceAdapter(path) as store:
        for _ in range(rounds):
            for key in store.list_keys("p"):
                value = store.load(key)
                if value is not None:
                    assert value["pad"] == "x" * 200, value
                    seen += 1
            last = store.load("last")
            assert last is None or set(last) == {"worker", "i"}
    return seen


def node_learns(path: str, node: int, failures: int) -> None:
    """One swarm node: record failures of its own workers, then sync through the store."""
    from journeyman.swarm.shared import (
        SharedContextState,
        SharedEconomicsState,
        SQLitePersistenceAdapter,
        sync_shared_state,
    )

    context, economics = SharedContextState(), SharedEconomicsState()
    with SQLitePersistenceAdapter(path) as store:
        for i in range(failures):
            context.record_failure(f"n{node}-w{i % 3}", f"step {i}", f"error {i} on {node}")
            economics.record(f"n{node}-w{i % 3}", "shared-fp")
            sync_shared_state(store, "demo", f"node{node}", context, economics)


def json_writer(directory: str, worker: int, rounds: int) -> None:
    from journeyman.swarm.shared import JSONFilePersistenceAdapter

    store = JSONFilePersistenceAdapter(directory)
    for i in range(rounds):
        store.save("same", {"worker": worker, "i": i, "pad": "y" * 5_000})
        store.save(f"own/{worker}", {"i": i})


def tree_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
