"""Compiled loops (placeholder)."""


def run_compiled(spec, arrays, batch):
    return None
