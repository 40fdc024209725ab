"""The HLO model, its parser and printer (private; see `hloscope` for the API)."""
