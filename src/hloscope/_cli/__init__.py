"""The `hloscope` command (private)."""
