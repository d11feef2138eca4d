"""Errors (SPEC §5): the right class, and a message naming the user's function and the culprit."""

import numpy as np
import pytest
import sympy

import symad as sd
import symad.numpy as snp  # noqa: F401  (the namespace the messages point to)

# ---------------------------------------------------------------------------
# The hierarchy
# ---------------------------------------------------------------------------


def test_error_hierarchy():
    assert issubclass(sd.SymadError, Exception)
    assert issubclass(sd.TracingError, sd.SymadError)
    assert issubclass(sd.TracingError, TypeError)
    assert issubclass(sd.CompileError, sd.SymadError)
    assert issubclass(sd.CompileError, RuntimeError)
    assert issubclass(sd.DifferentiationError, sd.SymadError)
    assert issubclass(sd.DifferentiationError, (TypeError, ValueError))


# ---------------------------------------------------------------------------
# Python control flow on traced values
# ---------------------------------------------------------------------------


def relu_branch(x):
    if x > 0:
        return x
    return -x


def halving_loop(x):
    while x > 1.0:
        x = x / 2
    return x


@pytest.mark.parametrize(
    "call",
    [
        lambda: sd.trace(relu_branch, 1.0),
        lambda: sd.grad(relu_branch)(1.0),
        lambda: sd.grad(relu_branch)(np.float64(-2.0)),
    ],
    ids=["trace", "grad", "grad-negative"],
)
def test_python_if_on_traced_value(call):
    with pytest.raises(sd.TracingError) as info:
        call()
    assert isinstance(info.value, TypeError)
    msg = str(info.value)
    assert "relu_branch" in msg
    assert "where" in msg


def test_python_while_on_traced_value():
    with pytest.raises(sd.TracingError) as info:
        sd.grad(halving_loop)(5.0)
    msg = str(info.value)
    assert "halving_loop" in msg
    assert "where" in msg


# ---------------------------------------------------------------------------
# Unsupported NumPy functions
# ---------------------------------------------------------------------------


def spectrum_loss(x):
    return np.sum(np.abs(np.fft.fft(x)))


def eigen_loss(a):
    return np.sum(np.linalg.eig(a)[0])


def sorted_loss(x):
    return np.sum(np.sort(x) * np.arange(3.0))


@pytest.mark.parametrize(
    "fun, arg, numpy_name",
    [
        (spectrum_loss, np.array([1.0, 2.0, 3.0]), "fft"),
        (eigen_loss, np.array([[2.0, 1.0], [1.0, 3.0]]), "eig"),
        (sorted_loss, np.array([3.0, 1.0, 2.0]), "sort"),
    ],
    ids=["fft", "eig", "sort"],
)
def test_unsupported_numpy_function(fun, arg, numpy_name):
    with pytest.raises(sd.TracingError) as info:
        sd.grad(fun)(arg)
    assert isinstance(info.value, TypeError)
    msg = str(info.value)
    assert numpy_name in msg
    assert fun.__name__ in msg


# ---------------------------------------------------------------------------
# Arguments too large to trace symbolically
# ---------------------------------------------------------------------------


def big_sum(signal):
    return np.sum(signal)


def test_a_large_argument_is_one_array_input():
    # 200,000 elements: one input and one node, no limit (whole-array operations).
    F = sd.trace(big_sum, np.zeros(200_000))
    assert F.stats()["nodes"] == 1 and F.stats()["inputs"] == 1
    assert np.all(sd.grad(big_sum)(np.zeros(200_000)) == 1.0)


def loop_sum(signal):
    total = 0.0
    for value in signal:  # element by element: bounded by MAX_SYMBOLIC_ELEMENTS
        total = total + value
    return total


@pytest.mark.parametrize("call", [lambda: sd.trace(loop_sum, np.zeros(200_000)),
                                  lambda: sd.grad(loop_sum)(np.zeros(200_000)),
                                  lambda: sd.trace(big_sum, np.zeros(200_000)).expand()],
                         ids=["trace", "grad", "expand"])
def test_reading_a_large_argument_element_by_element_is_refused(call):
    with pytest.raises(sd.TracingError) as info:
        call()
    msg = str(info.value)
    assert "whole-array operations" in msg and "MAX_SYMBOLIC_ELEMENTS = 200000" in msg
    assert "loop_sum" in msg or "big_sum" in msg


# ---------------------------------------------------------------------------
# Bad argnums
# ---------------------------------------------------------------------------


def bilinear(a, b):
    return a * b


@pytest.mark.parametrize(
    "argnums, culprit",
    [
        ((0, 0), "entry 0 appears twice"),
        ((1, 1), "entry 1 appears twice"),
        ("alpha", "entry 'alpha' is not an integer"),
        ((0, "alpha"), "entry 'alpha' is not an integer"),
        (1.5, "entry 1.5 is not an integer"),
        ((0, 1.5), "entry 1.5 is not an integer"),
        (5, "entry 5 is out of range"),
        ((0, 5), "entry 5 is out of range"),
        (-3, "entry -3 is out of range"),
        ((1, -3), "entry -3 is out of range"),
    ],
    ids=[
        "dup0",
        "dup1",
        "str",
        "str-in-tuple",
        "float",
        "float-in-tuple",
        "out-of-range",
        "out-of-range-in-tuple",
        "negative-out-of-range",
        "negative-out-of-range-in-tuple",
    ],
)
@pytest.mark.parametrize("transform", [sd.grad, sd.value_and_grad], ids=["grad", "vag"])
def test_bad_argnums(transform, argnums, culprit):
    with pytest.raises(ValueError) as info:
        transform(bilinear, argnums=argnums)(2.0, 3.0)
    assert isinstance(info.value, sd.SymadError)
    msg = str(info.value)
    assert culprit in msg
    assert "bilinear" in msg


@pytest.mark.parametrize("transform", [sd.grad, sd.value_and_grad], ids=["grad", "vag"])
def test_argnums_none_without_weights(transform):
    with pytest.raises(ValueError) as info:
        transform(bilinear, argnums=None)(2.0, 3.0)
    assert isinstance(info.value, sd.SymadError)
    msg = str(info.value)
    assert "weights" in msg
    assert "bilinear" in msg


# ---------------------------------------------------------------------------
# Integer inputs (a TypeError, as in JAX) — the message names function and argument
# ---------------------------------------------------------------------------


def scaled_log(count, rate):
    return np.log(count) * rate


def test_integer_input_message():
    with pytest.raises(TypeError) as info:
        sd.grad(scaled_log)(2, 5.0)
    msg = str(info.value)
    assert "scaled_log" in msg
    assert "count" in msg


# ---------------------------------------------------------------------------
# A custom primitive with no partials
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mystery_op():
    @sd.primitive
    def mystery_op(x):
        return x**3

    return mystery_op


def test_primitive_without_partials_evaluates(mystery_op):
    def uses_mystery(x):
        return mystery_op(x) + x

    np.testing.assert_allclose(sd.trace(uses_mystery, 2.0)(2.0), 10.0, rtol=1e-12)


def test_primitive_without_partials_cannot_be_differentiated(mystery_op):
    def uses_mystery(x):
        return mystery_op(x) + x

    with pytest.raises(sd.DifferentiationError) as info:
        sd.grad(uses_mystery)(2.0)
    assert isinstance(info.value, (TypeError, ValueError))
    msg = str(info.value)
    assert "mystery_op" in msg
    assert "uses_mystery" in msg


def test_an_escaped_scalar_says_it_escaped_whatever_it_meets():
    kept = []
    sd.trace(lambda x: kept.append(x) or x, 1.0)
    for other in (1.0, sympy.Symbol("z"), sympy.pi):
        with pytest.raises(sd.SymadError, match="outside a trace: a traced value escaped"):
            kept[0] + other


def test_integer_parameters_in_weights_are_not_differentiated():
    # As integer arguments (and JAX): once differentiated silently.
    labels = sd.Parameter(np.array([1, 2]), name="labels")
    for transform in (sd.grad, sd.value_and_grad):
        with pytest.raises(sd.DifferentiationError, match=r"Parameter 'labels' holds dtype int64"):
            transform(lambda x: np.sum(labels * x), weights=[labels])(np.ones(2))
    with pytest.raises(sd.DifferentiationError, match="argument 'x'"):
        sd.grad(lambda x: np.sum(x))(np.array([1, 2]))
    floats = sd.Parameter(np.array([1.0, 2.0]), name="floats")
    grads = sd.grad(lambda x: np.sum(floats * x), weights=[floats])(np.ones(2))
    np.testing.assert_array_equal(grads[1][0], [1.0, 1.0])
    # An integer Parameter that is not differentiated is fine (its values are used as floats).
    assert sd.grad(lambda x: np.sum(labels * x))(np.ones(2)).tolist() == [1.0, 2.0]
