"""Shared test set-up: every test starts from the same random state."""

import random

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _seed_random_generators():
    random.seed(0)
    np.random.seed(0)  # legacy global generator, for code that still uses it
    yield
