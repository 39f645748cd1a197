# The recordings' starting trees hold test files of their own: they are data here, not tests.
collect_ignore_glob = ["*/start/*"]
