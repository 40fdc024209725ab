"""Renderers: report data to text, JSON, Markdown, SVG, HTML (private)."""
