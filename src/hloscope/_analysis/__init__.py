"""Analyses: pure functions from the model to report data (private)."""
