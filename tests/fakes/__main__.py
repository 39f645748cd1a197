"""Run a fake model server in its own process.

    python -m tests.fakes openai --script script.json [--port 8123]

Prints the base URL on the first line of stdout, then serves until interrupted (or until stdin
closes, with --until-stdin-closes). The script file holds a JSON list of item dicts, e.g.
`[{"text": "hi"}, {"kind": "http_error", "status": 429, "retry_after": 1}]`; more items can be
queued at runtime with `POST /_fake/enqueue`, and `GET /_fake/requests` lists what arrived.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
from pathlib import Path

from .anthropic_server import FakeAnthropicServer
from .openai_server import FakeOpenAIServer
from .script import item_from_dict
from .server import FakeServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes", description=__doc__.splitlines()[0]
    )
    parser.add_argument("provider", choices=["openai", "anthropic"])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--script", type=Path, help="JSON file with a list of script items")
    parser.add_argument("--default", help="JSON item played once the script is used up")
    parser.add_argument("--until-stdin-closes", action="store_true")
    args = parser.parse_args(argv)

    items = [item_from_dict(d) for d in json.loads(args.script.read_text())] if args.script else []
    default = item_from_dict(json.loads(args.default)) if args.default else None
    cls: type[FakeServer] = FakeOpenAIServer if args.provider == "openai" else FakeAnthropicServer
    with cls(items, default=default, port=args.port) as server:
        print(server.base_url, flush=True)
        stop = threading.Event()
        if args.until_stdin_closes:
            threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
