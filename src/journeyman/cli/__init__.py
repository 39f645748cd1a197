"""The `journeyman` command line (Typer) and its headless output formats."""
