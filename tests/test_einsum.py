"""np.einsum traced: indices repeated within an operand and across three or more operands
(issue 29, item 5), values against NumPy and gradients against central differences."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import symad as sd

SIZES = {"i": 2, "j": 3, "k": 4, "l": 5, "m": 2}

# (subscripts): every operand's shape follows from SIZES.
CASES = [
    "ijk,lji,lli->lki",     # issue 29's case: a later operand repeats an index (a diagonal)
    "ii->i",                # a diagonal
    "ii->",                 # a trace
    "iij,jk->ik",           # a diagonal, then a product
    "ij,jk,kl->il",         # a chain of three
    "ij,ij,ij->",           # three operands, every index shared
    "ijk,kji,ij->k",        # three operands, an index in all of them and the output
    "i,i,i,i->i",           # four operands
    "lli,il->l",            # the repeated index also in the other operand and the output
    "ij,jk,ki->",           # a closed loop of three
    "mij,mjk,mkl->mil",     # a batch index through three operands
]


def _shapes(subscripts: str) -> list[tuple[int, ...]]:
    return [tuple(SIZES[c] for c in term) for term in subscripts.split("->")[0].split(",")]


def _central(f, args, position, h=1e-6):
    flat = args[position].reshape(-1)
    out = np.empty(flat.size)
    for index in range(flat.size):
        up, down = [a.copy() for a in args], [a.copy() for a in args]
        up[position].reshape(-1)[index] += h
        down[position].reshape(-1)[index] -= h
        out[index] = (f(*up) - f(*down)) / (2 * h)
    return out.reshape(args[position].shape)


@pytest.mark.parametrize("subscripts", CASES)
def test_einsum_values_and_gradients(subscripts):
    rng = np.random.default_rng(zlib.crc32(subscripts.encode()))  # hash() varies per process
    args = [rng.normal(size=shape) for shape in _shapes(subscripts)]
    weights = rng.normal(size=np.einsum(subscripts, *args).shape)

    def f(*operands):
        return np.sum(np.sin(np.einsum(subscripts, *operands)) * weights)

    # A sum of terms that cancel: its rounding is relative to the terms, not to the sum.
    scale = np.sum(np.abs(weights))
    np.testing.assert_allclose(sd.trace(f, *args)(*args), f(*args), rtol=1e-13, atol=1e-14 * scale)
    gradients = sd.grad(f, argnums=tuple(range(len(args))))(*args)
    for position, gradient in enumerate(gradients):
        np.testing.assert_allclose(gradient, _central(f, args, position), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("arguments, subscripts", [
    (([0, 1], [1, 2], [0, 2]), "ij,jk->ik"),
    (([0, 1], [1, 2]), "ij,jk"),                    # implicit output
    (([0, 0],), "ii"),                              # a trace, implicit
    (([Ellipsis, 1], [1, 2], [Ellipsis, 2]), "...j,jk->...k"),
])
def test_the_interleaved_form_is_the_string_form(arguments, subscripts):
    rng = np.random.default_rng(0)
    shapes = {"ij,jk->ik": [(2, 3), (3, 4)], "ij,jk": [(2, 3), (3, 4)], "ii": [(3, 3)],
              "...j,jk->...k": [(2, 5, 3), (3, 4)]}[subscripts]
    operands = [rng.normal(size=shape) for shape in shapes]
    interleaved = [item for pair in zip(operands, arguments) for item in pair]
    interleaved += list(arguments[len(operands):])

    def f(*ops):
        mixed = [item for pair in zip(ops, arguments) for item in pair] + list(arguments[len(ops):])
        return np.sum(np.einsum(*mixed) ** 2)

    np.testing.assert_allclose(sd.trace(f, *operands)(*operands),
                               np.sum(np.einsum(subscripts, *operands) ** 2), rtol=1e-13)
    np.testing.assert_allclose(np.einsum(*interleaved), np.einsum(subscripts, *operands))
    gradient = sd.grad(f)(*operands)
    np.testing.assert_allclose(gradient, _central(f, operands, 0), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("a_shape, b_shape", [
    ((2, 3, 4), (5, 4, 6)), ((2, 3, 4), (4,)), ((4,), (2, 4, 3)), ((3, 4), (2, 4, 5)),
    ((2, 2, 3), (3, 2)), ((1, 2, 3), (1, 3, 1)),
])
def test_dot_of_arrays_past_two_dimensions(a_shape, b_shape):
    # np.dot past 2-d sums a's last axis with b's second to last: tensordot, not matmul.
    rng = np.random.default_rng(len(a_shape) * 10 + len(b_shape))
    args = [rng.normal(size=a_shape), rng.normal(size=b_shape)]

    def f(a, b):
        return np.sum(np.sin(np.dot(a, b)))

    np.testing.assert_allclose(sd.trace(f, *args)(*args), f(*args), rtol=1e-13)
    for position, gradient in enumerate(sd.grad(f, argnums=(0, 1))(*args)):
        np.testing.assert_allclose(gradient, _central(f, args, position), rtol=1e-6, atol=1e-8)


# -- complex parts of real traced values (issue 29: real, imag, conj, angle, real_if_close) --


@pytest.mark.parametrize("name, derivative", [
    ("real", lambda x: np.ones_like(x)), ("conj", lambda x: np.ones_like(x)),
    ("conjugate", lambda x: np.ones_like(x)), ("real_if_close", lambda x: np.ones_like(x)),
    ("imag", lambda x: np.zeros_like(x)), ("angle", lambda x: np.zeros_like(x)),
])
@pytest.mark.parametrize("shape", [(), (1,), (2, 3)])
def test_complex_parts_of_real_values(name, derivative, shape):
    function = getattr(np, name)
    x = np.random.default_rng(3).normal(size=shape)
    if x.size > 1:
        x.reshape(-1)[:2] = [0.0, -0.0]  # angle: 0 and pi, with a derivative of 0 at both
    traced = sd.trace(function, x)
    np.testing.assert_array_equal(traced(x), function(x))
    assert np.signbit(traced(x)).tolist() == np.signbit(function(x)).tolist()
    np.testing.assert_array_equal(sd.grad(lambda x: np.sum(function(x)))(x), derivative(x))
    assert sd.trace(lambda z: np.angle(z, deg=True), x)(x).tolist() == np.angle(x, deg=True).tolist()
