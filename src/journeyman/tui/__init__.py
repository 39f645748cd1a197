"""The interactive terminal app (`journeyman`, `journeyman chat`); Textual loads only here."""
