from __future__ import annotations

from pathlib import Path

from journeyman.core.events import ErrorOccurred, TextDelta
from journeyman.session.redact import MASK, Redactor
from journeyman.session.trajectory import TrajectoryWriter, read_trajectory


def test_redactor_masks_env_secrets_and_known_key_shapes() -> None:
    redact = Redactor({"MY_SERVICE_TOKEN": "tok-1234567890", "HOME": "/root"})
    text = "token tok-1234567890 home /root key sk-ant-api03-abcdefghijklmnopqrstuv"
    cleaned = redact(text)
    assert "tok-1234567890" not in cleaned and "sk-ant-api03" not in cleaned
    assert "/root" in cleaned and cleaned.count(MASK) == 2


def test_trajectory_is_appended_redacted_and_tolerates_a_torn_line(tmp_path: Path) -> None:
    writer = TrajectoryWriter(tmp_path, "s1", Redactor({"OPENAI_API_KEY": "secret-value-123"}))
    writer.write(ErrorOccurred("provider", "bad key secret-value-123", False))
    writer.write(TextDelta("not persisted"))
    writer.close()
    with writer.path.open("a") as handle:
        handle.write('{"type": "half')  # what a kill -9 mid-write can leave
    events = read_trajectory(writer.path)
    assert [e["type"] for e in events] == ["error"]
    assert "secret-value-123" not in writer.path.read_text()
    assert writer.path == Path(tmp_path, "s1", "trajectory.jsonl")
