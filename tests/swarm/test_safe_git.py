"""The swarm's own git calls run none of the programs a repository's configuration names."""

from __future__ import annotations

import subprocess
from pathlib import Path

from journeyman.swarm.worktrees import Repo


def test_swarm_git_runs_no_filter_hook_or_fsmonitor(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    marker = tmp_path / "MARK"
    script = (
        "git init -q && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m base && "
        f"git config filter.x.clean 'touch {marker}-filter; cat' && "
        f"git config filter.x.smudge 'touch {marker}-smudge; cat' && "
        f"git config core.fsmonitor 'touch {marker}-fsmonitor; false' && "
        f"printf '#!/bin/sh\\ntouch {marker}-hook\\n' > .git/hooks/pre-commit && "
        "chmod +x .git/hooks/pre-commit && echo '* filter=x' > .gitattributes && echo a > a.txt"
    )
    subprocess.run(["bash", "-c", script], cwd=repo, check=True)
    git = Repo(repo)
    git.run("status")
    git.run("add", "-A")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    git.env().update(env | {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})
    git.run("commit", "-qm", "work")
    (repo / "a.txt").unlink()
    git.run("checkout", "--", "a.txt")
    assert (repo / "a.txt").read_text() == "a\n"
    assert sorted(p.name for p in tmp_path.glob("MARK-*")) == []
