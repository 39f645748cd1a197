"""`python -m journeyman` runs the command line."""

from journeyman.cli.app import main

main()
