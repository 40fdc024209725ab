"""Readers that find HLO modules in files, reports, logs and dumps (private)."""
