"""The backend registry (symad.compile.registry) and the one pipeline that reads it: a backend
that cannot take a graph hands it to its registered fallback, loudly, for scalar graphs and
array programs alike."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import symad as sd
from symad.compile import registry
from symad.errors import CompileError


def _refuse(graph, dtype, name):
    raise registry.BackendUnsupported("refusing backend: it takes nothing")


@pytest.fixture
def refusing(monkeypatch):
    record = registry.Backend("refusing", _refuse, _refuse, fallback="numpy")
    monkeypatch.setitem(registry._BACKENDS, "refusing", record)
    return record


@pytest.mark.parametrize("array_program", [False, True])
def test_a_backend_that_cannot_take_a_graph_falls_back_through_the_registry(refusing, caplog,
                                                                           array_program):
    if array_program:
        F = sd.trace(lambda x: np.sum(np.sin(x) * x), np.zeros(3))
        x, want = np.array([0.5, 1.0, 2.0]), np.sum(np.sin([0.5, 1.0, 2.0]) * [0.5, 1.0, 2.0])
    else:
        F = sd.trace(lambda x: np.sin(x) * x, 0.0)
        x, want = np.array([0.5, 1.0]), np.sin([0.5, 1.0]) * [0.5, 1.0]
    assert F.is_array_program == array_program
    with caplog.at_level(logging.WARNING, logger="symad"):
        f = F.compile("refusing")
    assert f.note == "refusing backend: it takes nothing; evaluated with numpy instead"
    assert f.note in caplog.text
    np.testing.assert_allclose(f(x), want, rtol=1e-15)


def test_a_backend_without_a_fallback_raises_its_reason(monkeypatch):
    monkeypatch.setitem(registry._BACKENDS, "refusing", registry.Backend("refusing", _refuse, _refuse))
    with pytest.raises(registry.BackendUnsupported, match="it takes nothing"):
        sd.trace(lambda x: np.sin(x), 0.0).compile("refusing")


def test_the_registry_lists_the_backends_and_refuses_unknown_ones(refusing):
    assert sd.available_backends()[:2] == ["numexpr", "numpy"] and "refusing" in sd.available_backends()
    assert not set(registry.PRECISION_BACKENDS) & set(sd.available_backends())
    with pytest.raises(CompileError, match="unknown backend 'nonesuch'"):
        registry.check_backend("nonesuch")
    with pytest.raises(CompileError, match="generates no module"):
        registry.check_backend("mpmath")
