"""Exporting Functions: LaTeX."""
