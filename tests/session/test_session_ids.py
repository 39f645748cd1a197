"""Session ids a person can type: a new id ends with a short random suffix, and a session is
named by its whole id, the beginning of it or the end of it, compared character for character
(no wildcard, no path), old ids included."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from journeyman.session.store import (
    SUFFIX_ALPHABET,
    SUFFIX_LENGTH,
    SessionNotFoundError,
    SessionStore,
    new_session_id,
    short_id,
)
from tests.fakes.store import new_session

NEW_ID = re.compile(rf"\d{{8}}-\d{{6}}-[{SUFFIX_ALPHABET}]{{{SUFFIX_LENGTH}}}")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    opened = SessionStore(tmp_path / "sessions")
    yield opened
    opened.close()


def test_a_new_id_is_its_start_time_then_a_short_suffix_that_reads_unambiguously() -> None:
    ids = {new_session_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(NEW_ID.fullmatch(i) for i in ids), sorted(ids)[:3]
    assert not set("".join(short_id(i) for i in ids)) & set("01ilo")
    assert min(ids)[:8] == time.strftime("%Y%m%d")  # sortable by the time it started


def test_a_session_is_named_by_its_suffix_or_its_prefix(store: SessionStore) -> None:
    first = new_session(store, "20261127-221500-k3x9qm")
    second = new_session(store, "20261127-221500-7az2kr")
    assert store.resolve_id("k3x9qm") == first
    assert store.resolve_id("2kr") == second
    assert store.resolve_id("20261127-221500-k") == first
    with pytest.raises(SessionNotFoundError, match="ambiguous: 2 sessions match") as both:
        store.resolve_id("20261127")
    assert first in both.value.message and second in both.value.message
    with pytest.raises(SessionNotFoundError, match="no session 'zzzzzz'"):
        store.resolve_id("zzzzzz")
    with pytest.raises(SessionNotFoundError, match="no session id given"):
        store.resolve_id("")


def test_ids_of_earlier_versions_and_derived_ids_still_resolve(store: SessionStore) -> None:
    old = new_session(store, "20250101-093000-1a2b3c4d")
    child = new_session(store, f"{old}-sub2-9f8e7d6c")
    assert store.resolve_id(old) == old  # whole, though it begins the child's id too
    assert store.resolve_id("1a2b3c4d") == old
    assert store.resolve_id("9f8e7d6c") == child
    with pytest.raises(SessionNotFoundError, match="ambiguous: 2 sessions match"):
        store.resolve_id("20250101-0930")


@pytest.mark.parametrize(
    "hostile",
    ["%", "_", "%%", "2026%", "%qm", "_3x9qm", "k3x9q_", "2026112_", "../k3x9qm", "/", "..",
     "*", "?", "[k]", "\\", "'; DROP TABLE sessions; --", "k3x9qm\x00", "K3X9QM", " k3x9qm"],
)  # fmt: skip
def test_wildcards_and_path_characters_match_literally(store: SessionStore, hostile: str) -> None:
    new_session(store, "20261127-221500-k3x9qm")
    new_session(store, "20261127-221501-7az2kr")
    with pytest.raises(SessionNotFoundError) as refused:
        store.resolve_id(hostile)
    assert "ambiguous" not in refused.value.message  # matched nothing, not everything
    assert len(store.list_sessions()) == 2


def test_an_id_with_wildcard_characters_is_found_only_literally(store: SessionStore) -> None:
    odd = new_session(store, "batch-x-task_1%")  # e.g. a batch task's session
    new_session(store, "batch-x-taskA1b")
    assert store.resolve_id("task_1%") == odd
    assert store.resolve_id("batch-x-task_") == odd
    with pytest.raises(SessionNotFoundError, match="no session"):
        store.resolve_id("taskA1%")


def test_a_filter_decides_which_sessions_a_partial_id_counts(store: SessionStore) -> None:
    mine = new_session(store, "20261127-221500-k3x9qm", workspace="/srv/mine")
    other = new_session(store, "20261127-221501-7az2kr", workspace="/srv/other")
    inside = lambda workspace: workspace.startswith("/srv/mine")  # noqa: E731
    assert store.resolve_id("20261127", inside=inside) == mine  # the other is not counted
    with pytest.raises(SessionNotFoundError, match="no session"):
        store.resolve_id("7az2kr", inside=inside)
    assert store.resolve_id(other, inside=inside) == other  # whole: the caller refuses it
