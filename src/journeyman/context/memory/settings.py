"""How much memory is kept verbatim, when it is compressed, and how much is rendered."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class MemorySettings(BaseModel):
    """How much memory is kept verbatim, when it is compressed and how much of it is rendered."""

    model_config = ConfigDict(extra="forbid")

    keep_attempts: int = Field(default=8, ge=1)
    """Most recent attempts kept verbatim by the rule stage; older ones become digests."""
    keep_tool_results: int = Field(default=6, ge=1)
    """Most recent tool results kept verbatim by the rule stage."""
    keep_modified_files: int = Field(default=5, ge=1)
    """Most recently modified files whose content is kept (one snapshot per path)."""
    keep_created_files: int = Field(default=50, ge=1)
    """Most recently created file paths kept; older ones are folded into a digest."""
    keep_decisions: int = Field(default=10, ge=1)
    """Most recent important decisions kept verbatim."""
    keep_milestones: int = Field(default=10, ge=1)
    """Most recent milestones kept verbatim."""
    keep_learnings: int = Field(default=12, ge=1)
    """Most recent learnings kept verbatim."""
    keep_model_responses: int = Field(default=20, ge=0)
    """Raw model responses kept in the debug-only part (older ones are dropped, not digested)."""
    keep_step_decisions: int = Field(default=50, ge=0)
    """The workflow's logged decisions kept in the debug-only part (older ones are dropped)."""
    compress_above_chars: int = Field(default=12_000, ge=0)
    """Compression runs only when the rendered memory is longer than this, in characters."""
    summarise_above_chars: int = Field(default=3_000, ge=0)
    """The model summarises the digests of older entries once they pass this many characters."""
    duplicate_similarity: float = Field(default=0.9, gt=0, le=1)
    """Two entries whose normalised texts are at least this similar (0..1) are duplicates."""
    tool_output_chars: int = Field(default=800, ge=100)
    """Characters of each tool result shown in the rendering (head and tail)."""
    file_content_chars: int = Field(default=3_000, ge=100)
    """Characters of each modified file's content shown in the rendering."""
