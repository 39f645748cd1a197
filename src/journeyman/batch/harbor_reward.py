"""The reward a Harbor task's tests wrote, as `suites/harbor_verify.py` reports it on its last
line. A task is resolved at a reward of 1 or more (full credit); a fraction is kept as the
task's reward but does not resolve it."""

from __future__ import annotations

import json
import math

REWARD_LINE = "HARBOR_REWARD "
"""Starts the verifier runner's last line (the same constant as in `suites/harbor_verify.py`,
which imports nothing from journeyman)."""
RESOLVED_AT = 1.0
"""The reward from which a Harbor task counts as resolved."""


def harbor_reward(output: str) -> tuple[float | None, str | None]:
    """(reward, None) from the last reward line of `output`, or (None, why not).

    With several named rewards (reward.json), the one called `reward` decides; a single
    reward of another name decides too."""
    line = next((ln for ln in reversed(output.splitlines()) if ln.startswith(REWARD_LINE)), None)
    if line is None:
        return None, "the verifier printed no reward (it did not finish)"
    try:
        data = json.loads(line[len(REWARD_LINE) :])
    except ValueError:
        return None, "the verifier's reward line is not JSON"
    if not isinstance(data, dict):
        return None, "the verifier's reward line is not an object"
    if "error" in data:
        return None, str(data["error"])[:300]
    rewards = data.get("rewards")
    if not isinstance(rewards, dict) or not rewards:
        return None, "the verifier reported no reward"
    if "reward" in rewards:
        value = rewards["reward"]
    elif len(rewards) == 1:
        value = next(iter(rewards.values()))
    else:
        names = ", ".join(sorted(str(key) for key in rewards))
        return None, f"reward.json names several rewards ({names}) and none is `reward`"
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None, "the reward is not a finite number"
    return float(value), None
