"""200 random runs under token caps, CJK and emoji prompts among them, with usage counted
honestly by the provider from what it was sent: no run counts a token past its cap."""

from __future__ import annotations

import pytest

from tests.support.cap_trials import LANGUAGES, run_trials, summarise

TRIALS = 200


@pytest.mark.slow
def test_no_random_run_passes_its_token_cap() -> None:
    results = run_trials(TRIALS, first_seed=0)
    summary = summarise(results)
    over = [(r.setup, r.peak_counted) for r in results if r.overshoot > 0]
    assert summary.over == 0, over[:5]
    # the trials cover what the cap must withstand
    assert all(summary.by_language[language][0] >= 20 for language in LANGUAGES)
    assert {r.setup.tokenizer for r in results} == {"bpe", "bytes"}
    assert any(r.setup.hard for r in results) and any(not r.setup.hard for r in results)
    assert any(r.setup.compaction for r in results)
    assert summary.endings["max_tokens"] >= TRIALS // 2  # most runs ran into their cap
