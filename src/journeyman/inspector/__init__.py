"""A session as one self-contained HTML page: outcome, timeline, diffs, per-step charts.

    report = load_report(store, session_id)   # read (and redacted again) from the store
    page = render_html(report)                # one string: styles, script and charts inline

`journeyman inspect ID|--last [-o FILE.html] [--open]` writes it (its command: cli/inspect_cmd.py).
"""

from journeyman.inspector.model import Report, load_report
from journeyman.inspector.render import render_html

__all__ = ["Report", "load_report", "render_html"]
