from journeyman.core.text import (
    clip,
    clip_noted,
    clip_start,
    head_and_tail,
    noted_cut,
    one_line,
)


def test_clip_keeps_short_text_and_ends_a_cut_with_one_ellipsis_within_the_limit() -> None:
    assert clip("short", 10) == "short"
    assert clip("abcdefghijkl", 6) == "abcde…"
    assert len(clip("x" * 100, 20)) == 20
    assert clip("word    more words", 9) == "word…"  # no spaces left before the ellipsis


def test_one_line_collapses_whitespace_before_clipping() -> None:
    assert one_line("a\n\n  b\tc", 20) == "a b c"
    assert one_line("one two three four", 8) == "one two…"


def test_clip_start_keeps_the_end() -> None:
    assert clip_start("abcdefghij", 4) == "…hij"
    assert clip_start("abc", 4) == "abc"


def test_clip_noted_says_how_much_was_cut() -> None:
    assert clip_noted("abcdefghij", 4) == "abcd… [6 characters cut]"
    assert clip_noted("a" * 2_004, 4, "{total:,} in all") == "aaaa… [2,004 in all]"
    assert clip_noted("abc", 4) == "abc"


def test_a_text_cut_before_it_arrived_is_noted_the_same_way() -> None:
    assert noted_cut("abcd", "about 9 more bytes") == "abcd… [about 9 more bytes]"
    assert noted_cut("abcd", "6 characters cut") == clip_noted("abcdefghij", 4)


def test_head_and_tail_keeps_both_ends_and_counts_the_cut() -> None:
    text = "H" * 50 + "M" * 1_000 + "T" * 50
    kept = head_and_tail(text, 100)
    assert kept.startswith("H" * 50 + "\n[... 1,000 characters cut ...]\n")
    assert kept.endswith("T" * 50)
    three_quarters = head_and_tail("x" * 75 + "y" * 500 + "z" * 25, 100, head_share=3 / 4)
    assert three_quarters.startswith("x" * 75 + "\n") and three_quarters.endswith("\n" + "z" * 25)
    assert head_and_tail("fits", 100) == "fits"
