"""The reference fixes of the micro-suite are test data, not tests."""

collect_ignore = ["micro_fixes"]
