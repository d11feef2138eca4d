"""Reliability: the NumPy research code writes works or fails clearly; documented edge semantics.

Reference values marked "JAX 0.10.2" were computed with ``jax.grad`` /
``jax.jvp`` / ``jax.jacfwd`` / ``jax.hessian`` (float64, CPU) in a scratch
script that is not part of the suite, and re-checked against an installed
JAX 0.10.2 on 2026-11-23; every value below agreed. JAX is never imported
here, so the suite does not need it.
"""

import re

import numpy as np
import pytest
import scipy.special
import sympy

import symad as sd
import symad.numpy as snp
from symad.graph import active_builders
from symad.testing import check_grads

RNG_SEED = 7


def finite_difference_gradient(f, x, eps=1e-6):
    x = np.asarray(x, dtype=float)
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = eps
        with np.errstate(all="ignore"):  # np.where evaluates both branches
            grad[index] = (f(x + step) - f(x - step)) / (2 * eps)
    return grad


# ---------------------------------------------------------------------------
# 1. The NumPy a research script writes
# ---------------------------------------------------------------------------


def test_the_issue_examples_now_work_or_fail_clearly():
    def fill_plain_numpy(v):
        out = np.zeros(3)
        out[0] = v[0] ** 2
        return np.sum(out)

    with pytest.raises(sd.TracingError) as info:
        sd.grad(fill_plain_numpy)(np.ones(3))
    message = str(info.value)
    assert "fill_plain_numpy" in message
    assert "plain NumPy array" in message and "snp.zeros" in message and "like=x" in message
    assert "converts a traced value to a Python number" not in message
    # The chain keeps NumPy's error (it points at the line of the store) but not the
    # misleading "converts a traced value to a Python number" behind it.
    chained = []
    error = info.value
    while error is not None:
        chained.append(str(error))
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    assert len(chained) == 2 and "array element" in chained[1]
    assert not any("Python number" in text for text in chained)

    assert sd.grad(lambda v: np.sum(v.copy()))(np.ones(3)).tolist() == [1.0, 1.0, 1.0]


def test_element_by_element_filling_with_snp_zeros():
    def fill(v):
        out = snp.zeros(3)
        for i in range(3):
            out[i] = v[i] ** 2
        out[1:] += v[0]          # slice assignment with broadcasting
        return out

    F = sd.trace(fill, np.ones(3))
    v0, v1, v2 = F.inputs[0]
    assert F.formula() == sympy.ImmutableDenseNDimArray([v0**2, v1**2 + v0, v2**2 + v0])
    x = np.array([1.0, 2.0, 3.0])
    assert np.allclose(sd.jacobian(fill)(x), [[2, 0, 0], [1, 4, 0], [1, 0, 6]])


@pytest.mark.parametrize("make", [
    lambda v: np.zeros(3, like=v),
    lambda v: np.zeros_like(v),
    lambda v: np.empty_like(v),
    lambda v: snp.zeros_like(v),
    lambda v: np.full_like(v, 0.0),
    lambda v: np.ones_like(v) * 0,
])
def test_every_array_constructor_gives_an_assignable_traced_array(make):
    def f(v):
        out = make(v)
        out[2] = v[0] * v[1]
        return np.sum(out)

    assert sd.grad(f)(np.array([2.0, 5.0, 7.0])).tolist() == [5.0, 2.0, 0.0]


def test_constructors_follow_numpy_outside_a_trace():
    assert snp.zeros(2).tolist() == [0.0, 0.0] and snp.zeros(2).dtype == np.float64
    assert snp.ones_like(np.ones(2, dtype=np.float32)).dtype == np.float32
    assert snp.full_like(np.arange(2), 3).tolist() == [3, 3]
    assert snp.full((2,), 2.5).tolist() == [2.5, 2.5]


def test_full_and_full_like_take_a_traced_fill_value():
    F = sd.trace(lambda v: np.full_like(v, v[0] * 2), np.ones(2))
    v0, _ = F.inputs[0]
    assert F.formula() == sympy.ImmutableDenseNDimArray([2 * v0, 2 * v0])


def test_item_assignment_is_copy_on_write():
    def f(v):
        original = v                 # the argument itself
        row = v[0:2]                 # a view in NumPy; here it never sees later writes
        copy = v.copy()
        copy[0] = 10.0
        v2 = v.at[1].set(v[2])
        return original + 0, row, copy, v2

    F = sd.trace(f, np.ones(3))
    v0, v1, v2 = F.inputs[0]
    original, row, copy, updated = F.formula(expand=True)
    assert list(original) == [v0, v1, v2]
    assert list(row) == [v0, v1]
    assert list(copy) == [sympy.Float(10.0), v1, v2]
    assert list(updated) == [v0, v2, v2]


def test_assigning_into_an_argument_does_not_change_the_traced_inputs():
    def f(v):
        v[0] = v[1] * 3
        return v

    F = sd.trace(f, np.ones(2))
    assert [str(s) for s in F.inputs[0]] == ["v[0]", "v[1]"]
    assert F(np.array([1.0, 2.0])).tolist() == [6.0, 2.0]


def test_at_updates_are_functional():
    def f(v):
        added = v.at[1:].add(v[0])
        return np.sum(added ** 2) + np.sum(v.at[0].multiply(3.0))

    x = np.array([1.0, 2.0, 3.0])
    expected = finite_difference_gradient(lambda y: np.sum(np.r_[y[0], y[1:] + y[0]] ** 2)
                                          + 3 * y[0] + y[1] + y[2], x)
    assert np.allclose(sd.grad(f)(x), expected, atol=1e-6)


def test_assignment_errors_name_the_shapes():
    def f(v):
        out = snp.zeros(3)
        out[0:2] = v            # shape (3,) into (2,)
        return out

    with pytest.raises(sd.TracingError, match=r"shape \(3,\).*shape \(2,\)"):
        sd.trace(f, np.ones(3))
    with pytest.raises(sd.TracingError, match="indexes with a traced value"):
        sd.trace(lambda v: v.at[v[0]].set(1.0), np.ones(3))


ARRAY_METHODS = {
    "copy": lambda x: x.copy().sum(),
    "astype": lambda x: x.astype(np.float64).sum() + x.astype("float")[0, 1],
    "T": lambda x: (x.T * np.arange(12.0).reshape(4, 3)).sum(),
    "sum_axis": lambda x: (x.sum(axis=0) ** 2).sum() + x.sum(axis=1, keepdims=True)[1, 0],
    "mean": lambda x: (x.mean(axis=1) ** 2).sum(),
    "prod": lambda x: x.prod(axis=0).sum(),
    "max_min": lambda x: x.max(axis=1).sum() - x.min(axis=0).sum(),
    "var_std": lambda x: x.var(axis=0).sum() + x.std(axis=1, keepdims=True).sum(),
    "reshape": lambda x: (x.reshape(4, 3) * np.arange(12.0).reshape(4, 3)).sum() + x.reshape(-1)[5],
    "ravel_flatten": lambda x: (x.ravel() ** 2).sum() + x.flatten()[0],
    "dot": lambda x: x.dot(np.arange(4.0)).dot(np.ones(3)),
    "clip": lambda x: x.clip(-0.5, 0.5).sum(),
    "squeeze": lambda x: x.reshape(1, 3, 4).squeeze().sum() + x.reshape(3, 1, 4).squeeze(axis=1)[0, 0],
    "swapaxes": lambda x: (x.swapaxes(0, 1) * np.arange(12.0).reshape(4, 3)).sum(),
    "transpose_axes": lambda x: (x.reshape(3, 2, 2).transpose(2, 0, 1) ** 2).sum(),
    "cumsum": lambda x: (x.cumsum(axis=1) ** 2).sum(),
    "iteration": lambda x: sum((row ** 2).sum() * (i + 1) for i, row in enumerate(x)),
    "tolist": lambda x: sum(value * value for row in x.tolist() for value in row),
    "positional_axis": lambda x: (x.sum(0) ** 2).sum() + x.max(1).sum() + x.mean(0, np.float64).sum(),
    "out_none": lambda x: x.sum(axis=0, out=None).sum() + np.sum(x, axis=1, out=None)[0],
    "std_ddof": lambda x: x.std(ddof=1) + np.var(x, axis=0, ddof=1).sum() + x.var(1, ddof=2).sum(),
    "clip_min_max_keywords": lambda x: x.clip(min=-0.5).sum() + np.clip(x, max=0.25).sum(),
    "item_of_a_constant": lambda x: (x * snp.zeros_like(x).item(0) + np.full_like(x, 2.0).item(1, 2) * x).sum(),
}


@pytest.mark.parametrize("name", sorted(ARRAY_METHODS))
def test_ndarray_methods_on_traced_arrays_match_numpy(name):
    method = ARRAY_METHODS[name]
    x = np.random.default_rng(RNG_SEED).normal(size=(3, 4))
    F = sd.trace(method, x)
    assert np.isclose(F(x), method(x))      # the same code on a NumPy array
    expected = finite_difference_gradient(method, x)
    assert np.allclose(sd.grad(method)(x), expected, atol=1e-5)


def test_shape_attributes_len_and_iteration():
    def f(x):
        assert x.ndim == 2 and x.size == 6 and x.shape == (2, 3) and len(x) == 2
        assert np.ndim(x) == 2 and np.shape(x) == (2, 3) and np.size(x) == 6
        return [row.sum() for row in x]

    assert [float(v) for v in sd.trace(f, np.ones((2, 3)))(np.arange(6.0).reshape(2, 3))] == [3.0, 12.0]
    with pytest.raises(sd.TracingError, match="len"):
        sd.trace(lambda x: len(x), 1.0)


def test_item_explains_why_a_traced_value_has_no_number():
    with pytest.raises(sd.TracingError) as info:
        sd.grad(lambda v: v[0:1].item() * 2)(np.ones(3))
    message = str(info.value)
    assert "item()" in message and "symbol" in message and "x[0]" in message
    with pytest.raises(sd.TracingError, match=r"shape \(3,\).*exactly one element"):
        sd.trace(lambda v: v.item(), np.ones(3))
    # A constant element has a number: item() gives it, as NumPy's does.
    def scaled(v):
        weights = snp.zeros(3)
        weights[1] = 2.5
        return v * weights.item(1) + snp.ones((2, 2)).item(3)

    F = sd.trace(scaled, 1.0)
    (v,) = F.inputs
    assert F.formula() == 2.5 * v + 1.0


@pytest.mark.parametrize("call, keyword", [
    (lambda v: v.sum(where=v > 0), "ndarray.sum with the keyword 'where'"),
    (lambda v: v.max(initial=0.0), "ndarray.max with the keyword 'initial'"),
    (lambda v: v.mean(out=np.zeros(())), "ndarray.mean with the keyword 'out'"),
    (lambda v: np.sum(v, where=v > 0), "numpy.sum with the keyword 'where'"),
    (lambda v: np.std(v, correction=1), "numpy.std with the keyword 'correction'"),
])
def test_array_method_keywords_symad_does_not_trace_name_themselves(call, keyword):
    def statistic(v):
        return call(v)

    with pytest.raises(sd.TracingError) as info:
        sd.grad(statistic)(np.array([1.0, -2.0, 3.0]))
    message = str(info.value)
    assert keyword in message and "statistic" in message and "it takes (axis" in message


def test_std_with_ddof_matches_numpy_and_its_exact_derivative():
    x = np.array([1.0, 2.0, 4.0, 7.0])
    F = sd.trace(lambda v: v.std(ddof=1), x)
    assert float(F(x)) == pytest.approx(np.std(x, ddof=1), rel=1e-15)
    n, deviation = x.size, x - x.mean()
    expected = deviation / ((n - 1) * np.std(x, ddof=1))   # d/dx_i sqrt(sum d^2 / (n - 1))
    assert np.allclose(sd.grad(lambda v: v.std(ddof=1))(x), expected, rtol=1e-14)
    assert np.isnan(float(sd.trace(lambda v: np.var(v, ddof=4), x)(x)))  # N - ddof = 0, as NumPy


def test_astype_to_float32_keeps_the_traced_value():
    F = sd.trace(lambda x: x.astype(np.float32) * 2, np.ones(2))
    assert F(np.array([1.0, 2.0])).tolist() == [2.0, 4.0]


@pytest.mark.parametrize("dtype", [int, np.int8, np.int32, np.int64, snp.int64])
@pytest.mark.parametrize("shape", [(), (1,), (4,), (2, 3)], ids=str)
def test_astype_to_integers_rounds_towards_zero_with_a_zero_derivative(dtype, shape):
    # NumPy's cast truncates; JAX's derivative of an integer cast is zero.
    x = np.random.default_rng(len(shape)).uniform(0.0, 9.0, shape)
    F = sd.trace(lambda v: v.astype(dtype) * 1.0 + v, x)
    np.testing.assert_array_equal(F(x), x.astype(dtype) + x)
    np.testing.assert_array_equal(F(-x), (-x).astype(dtype) - x)
    assert sd.trace(lambda v: v.astype(dtype), x).compile("numpy")  # compiles
    np.testing.assert_array_equal(sd.grad(lambda v: np.sum(v.astype(dtype) * v))(x), x.astype(dtype))


def test_integer_casts_index_and_say_their_dtype():
    def f(w):
        indices = snp.int64(w[:, -1])       # autograd's test_cast_to_int, through symad.numpy
        assert indices.dtype == snp.int64 and indices.dtype == np.int64
        assert w.astype(np.int32).dtype == np.int32
        return w[:, :-1][indices].sum()

    w = np.random.default_rng(1).standard_normal((5, 4))
    h = 1e-6
    direction = np.random.default_rng(2).standard_normal((5, 4))
    tangent = sd.jvp(f, (w,), (direction,))[1]
    assert np.isclose(tangent, (f(w + h * direction) - f(w - h * direction)) / (2 * h), rtol=1e-6)
    np.testing.assert_array_equal(np.zeros(2, dtype=snp.int64), np.zeros(2, dtype=np.int64))
    assert snp.int64(2.7) == 2 and isinstance(np.int64(3), snp.int64) and snp.int8(-1.5) == -1
    # NumPy's own np.int64(x) makes an array before symad sees it: the refusal names both spellings
    with pytest.raises(sd.TracingError, match=r"np\.int32\(x\).*snp\.int32\(x\).*astype"):
        sd.grad(lambda v: np.sum(v[np.int32(v)]))(np.ones(3))


def test_astype_to_other_dtypes_is_refused_clearly():
    def rounds(v):
        return v.astype(bool).sum()

    with pytest.raises(sd.TracingError) as info:
        sd.grad(rounds)(np.ones(3))
    assert "rounds" in str(info.value) and "astype(bool)" in str(info.value)
    assert "snp.where" in str(info.value)
    with pytest.raises(sd.TracingError, match="astype.uint8.*signed integer"):
        sd.grad(lambda v: v.astype(np.uint8).sum())(np.ones(3))


# ---------------------------------------------------------------------------
# 2. Every failure is a SymadError naming the function, the argument and the fix
# ---------------------------------------------------------------------------


def test_shape_mismatch_names_both_shapes_and_the_operation():
    def adds(v):
        return v + np.ones(4)

    with pytest.raises(sd.TracingError) as info:
        sd.grad(lambda v: np.sum(adds(v)))(np.ones(3))
    assert "add" in str(info.value) and "(3,)" in str(info.value) and "(4,)" in str(info.value)

    def multiplies(a, b):
        return a @ b

    with pytest.raises(sd.TracingError) as info:
        sd.trace(multiplies, np.ones((2, 3)), np.ones((2, 3)))
    message = str(info.value)
    assert "matmul" in message and "(2, 3)" in message and "multiplies" in message


@pytest.mark.parametrize("call, unsupported, nearest", [
    (lambda v: np.nansum(v), "numpy.nansum", "np.sum"),
    (lambda v: np.sum(np.nancumsum(v)), "numpy.nancumsum", "np.cumsum"),
    (lambda v: np.sum(np.arcsinh(v) + np.nanmax(v)), "numpy.nanmax", "np.max"),
])
def test_unsupported_numpy_functions_name_the_nearest_supported_one(call, unsupported, nearest):
    with pytest.raises(sd.TracingError) as info:
        sd.grad(call)(np.ones(3))
    message = str(info.value)
    assert unsupported in message and nearest in message and "<lambda>" in message
    assert "@sd.primitive" in message


@pytest.mark.parametrize("call, rewrite", [
    (lambda v: np.average(v, weights=[1.0, 2.0, 3.0]), "np.sum(w * x) / np.sum(w)"),
    (lambda v: np.ptp(v), "np.max(x) - np.min(x)"),
    (lambda v: np.heaviside(v, 0.5), "snp.where(x > 0, 1.0, 0.0)"),
])
def test_unsupported_numpy_functions_suggest_a_traced_rewrite(call, rewrite):
    with pytest.raises(sd.TracingError) as info:
        sd.grad(lambda v: np.sum(call(v)))(np.ones(3))
    assert rewrite in str(info.value)


def test_has_aux_on_a_single_output():
    def loss(w):
        return np.sum(w ** 2)

    with pytest.raises(sd.DifferentiationError) as info:
        sd.grad(loss, has_aux=True)(np.ones(2))
    assert "loss" in str(info.value) and "has_aux=True" in str(info.value) and "tuple" in str(info.value)


def test_weights_that_are_not_parameters():
    def model(x):
        return x

    with pytest.raises(sd.DifferentiationError) as info:
        sd.grad(model, argnums=None, weights=[np.ones(2)])
    message = str(info.value)
    assert "model" in message and "weights" in message and "sd.Parameter(value" in message


def test_batch_shapes_that_do_not_broadcast_name_both():
    F = sd.trace(lambda a, b: a.sum() * b, np.ones(3), np.ones(2), name="scaled")
    with pytest.raises(sd.TracingError) as info:
        F(np.ones((5, 3)), np.ones((4, 2)))
    message = str(info.value)
    assert "scaled" in message and "(5, 3)" in message and "(4, 2)" in message
    assert "batch (5,)" in message and "batch (4,)" in message and "size 1" in message
    assert F(np.ones((5, 3)), np.ones((1, 2))).shape == (5, 2)  # a broadcasting batch works


def test_custom_primitive_without_partials_then_with_them():
    @sd.primitive
    def squash(x):
        return x / (1 + np.abs(x))

    def model(x):
        return squash(x) * 2

    gradient = sd.grad(model)
    with pytest.raises(sd.DifferentiationError) as info:
        gradient(1.0)
    message = str(info.value)
    assert "squash" in message and "model" in message and "defpartials" in message

    @squash.defpartials
    def _(x):
        return (1 / (1 + abs(x)) ** 2,)

    assert float(gradient(1.0)) == pytest.approx(0.5)  # the failed call left nothing cached


def test_partials_rule_of_the_wrong_arity_then_a_right_one():
    @sd.primitive
    def softsign(x):
        return x / (1 + np.abs(x))

    softsign.defpartials(lambda x, scale: (scale / (1 + abs(x)) ** 2,))
    gradient = sd.grad(lambda x: softsign(x) * 2)
    with pytest.raises(sd.DifferentiationError) as info:
        gradient(1.0)
    message = str(info.value)
    assert "softsign.defpartials" in message and "1 argument" in message and "def rule(x0)" in message
    softsign.defpartials(lambda x: (1 / (1 + abs(x)) ** 2,))
    assert float(gradient(1.0)) == pytest.approx(0.5)


def test_complex_values_a_trace_did_not_see_are_refused_naming_the_argument_and_the_fix():
    # Complex arguments are traced (tests/test_complex.py); a function traced real refuses
    # a complex one, and grad a complex output, each saying what to do.
    with pytest.raises(sd.TracingError) as info:
        sd.trace(lambda z: z * 2, 1.0)(np.ones(2, dtype=complex))
    message = str(info.value)
    assert "complex" in message and "argument 0" in message and "sd.trace(f, 1j)" in message
    with pytest.raises(sd.DifferentiationError, match="holomorphic=True"):
        sd.grad(lambda a, z: a * z)(1.0, 1.0 + 2.0j)


def test_unknown_backend():
    F = sd.trace(lambda x: x * 2, 1.0)
    with pytest.raises(sd.CompileError) as info:
        F.compile("fortran")
    assert "fortran" in str(info.value) and "numpy" in str(info.value)
    assert float(F.compile("numpy")(2.0)) == 4.0


def test_a_transform_whose_first_call_failed_works_on_the_corrected_call():
    returns_aux = {"flag": False}

    def loss(w):
        value = np.sum(w ** 2)
        return (value, w[0]) if returns_aux["flag"] else value

    gradient = sd.grad(loss, has_aux=True)
    with pytest.raises(sd.DifferentiationError):
        gradient(np.ones(2))
    assert active_builders() == []
    returns_aux["flag"] = True
    grads, (aux,) = gradient(np.array([1.0, 2.0]))
    assert grads.tolist() == [2.0, 4.0] and float(aux) == 1.0


@pytest.mark.parametrize("broken", [
    lambda v: np.sum(v + np.ones(4)),
    lambda v: np.histogram(v)[0],                 # not traced
    lambda v: v.item(),
    lambda v: float(v[0]),
    lambda v: (np.zeros(3).__setitem__(0, v[0]), 1.0)[1],
    lambda v: 1 / 0,                              # the user's own exception
])
def test_no_trace_is_left_open_after_an_error(broken):
    with pytest.raises((sd.SymadError, ZeroDivisionError)) as info:
        sd.grad(broken)(np.ones(3))
    if isinstance(info.value, ZeroDivisionError):
        assert not isinstance(info.value, sd.SymadError)  # the user's exception, unchanged
    assert active_builders() == []
    assert float(sd.grad(lambda x: x ** 2)(3.0)) == 6.0


# ---------------------------------------------------------------------------
# 3. Conventions at non-differentiable points (reference: JAX 0.10.2)
# ---------------------------------------------------------------------------


def test_abs_sign_and_ties_match_jax():
    assert float(sd.grad(np.abs)(0.0)) == 1.0            # JAX 0.10.2: grad(jnp.abs)(0.) = 1.0
    assert float(sd.grad(np.abs)(-2.0)) == -1.0
    assert float(sd.grad(sd.grad(lambda x: np.abs(x) ** 2))(0.0)) == 2.0   # JAX: 2.0
    assert float(sd.grad(np.sign)(0.0)) == 0.0           # JAX: 0.0
    assert float(sd.grad(np.sign)(1.0)) == 0.0           # JAX: 0.0
    assert [float(g) for g in sd.grad(np.maximum, (0, 1))(1.0, 1.0)] == [0.5, 0.5]  # JAX: 0.5, 0.5
    assert [float(g) for g in sd.grad(np.minimum, (0, 1))(1.0, 1.0)] == [0.5, 0.5]  # JAX: 0.5, 0.5
    assert float(sd.grad(lambda x: np.maximum(x, 0.0))(0.0)) == 0.5    # JAX: 0.5
    assert sd.grad(np.max)(np.array([1.0, 1.0, 0.0])).tolist() == [0.5, 0.5, 0.0]  # JAX: same
    assert float(sd.grad(lambda x: np.clip(x, 0.0, 1.0))(0.0)) == 0.5  # JAX jnp.clip: 0.5
    assert float(sd.grad(lambda x: np.clip(x, 0.0, 1.0))(1.0)) == 0.5  # JAX jnp.clip: 0.5
    assert float(sd.grad(lambda x: snp.where(x > 0, x, 0.0))(0.0)) == 0.0   # JAX: 0.0


def test_more_points_against_jax():
    assert float(sd.grad(sd.grad(np.abs))(0.0)) == 0.0                # JAX 0.10.2: 0.0
    # The subgradient 0 at the kink, for code that wants it (docs/api.md):
    abs0 = sd.primitive(np.abs, name="abs0")
    abs0.defpartials(lambda x: (np.sign(x),))
    assert [float(sd.grad(abs0)(x)) for x in (-2.0, 0.0, 3.0)] == [-1.0, 0.0, 1.0]
    with pytest.raises(sd.TracingError, match=r"abs0\(\) called with 2 arguments"):
        sd.trace(lambda x: abs0(x, x), 1.0)   # a ufunc's arity is its nin, not its signature
    assert float(sd.grad(lambda x: np.maximum(x, x))(1.0)) == 1.0     # JAX: 1.0 (½ + ½)
    assert sd.grad(np.min)(np.array([0.0, 0.0, 1.0])).tolist() == [0.5, 0.5, 0.0]  # JAX: same
    assert float(sd.grad(np.sqrt)(0.0)) == np.inf                     # JAX: inf
    assert float(sd.grad(np.sinc)(0.0)) == 0.0                        # JAX: 0.0
    assert float(sd.grad(lambda y: 0.0 ** y)(2.0)) == 0.0             # JAX: 0.0 (constant base)
    # Where symad differs from JAX, on purpose (docs/api.md):
    assert np.isnan(float(sd.grad(lambda x, y: x ** y, 1)(0.0, 2.0)))  # JAX: 0.0; SymPy's log(x)*x**y
    assert float(sd.grad(lambda x: guarded_sqrt(x) + np.sqrt(x))(0.0)) == np.inf  # JAX: nan
    assert float(sd.grad(guarded_sinc)(0.0)) == 0.0                   # JAX: nan (untaken branch)
    # The origin of hypot/norm is 0/0 in the chain rule: nan in both (JAX's hypot
    # gives 0.5, 0.5 there, an artefact of its max/min implementation).
    with np.errstate(invalid="ignore"):
        assert np.isnan(sd.grad(np.linalg.norm)(np.zeros(2))).all()   # JAX: [nan, nan]
        assert all(np.isnan(g) for g in sd.grad(np.hypot, (0, 1))(0.0, 0.0))


def guarded_sqrt(x):
    return snp.where(x > 0, np.sqrt(x), 0.0)


def guarded_xlogx(x):
    return snp.where(x > 0, x * np.log(x), 0.0)


def guarded_radius(v):
    r2 = v[0] ** 2 + v[1] ** 2
    return snp.where(r2 > 0, np.sqrt(r2), 0.0)


def guarded_sinc(x):
    return snp.where(x != 0, np.sin(x) / x, 1.0)


@pytest.mark.parametrize("f, at_zero, elsewhere, derivative_elsewhere", [
    (guarded_sqrt, 0.0, 0.25, 1.0),                      # 1/(2 sqrt(x))
    (guarded_xlogx, 0.0, 0.5, np.log(0.5) + 1),          # log(x) + 1
])
def test_the_branch_not_taken_never_leaks_nan(f, at_zero, elsewhere, derivative_elsewhere):
    # JAX 0.10.2 gives nan for grad(where(x > 0, sqrt(x), 0))(0.) -- its "double
    # where" gotcha -- and 0.0 for the jvp; symad gives 0 in every mode.
    second = sd.grad(sd.grad(f))
    for value in (
        sd.grad(f)(at_zero),
        sd.value_and_grad(f)(at_zero)[1],
        sd.jvp(f, (at_zero,), (1.0,))[1],
        sd.vjp(f, at_zero)[1](1.0)[0],
        sd.jacfwd(f)(at_zero),
        sd.jacrev(f)(at_zero),
        sd.hessian(f)(at_zero),
        second(at_zero),
        sd.grad(sd.grad(sd.grad(f)))(at_zero),
        sd.jacfwd(sd.jacrev(f))(at_zero),
        sd.derivative(f, 3)(at_zero),
    ):
        assert np.isfinite(value) and float(value) == 0.0
    assert float(sd.grad(f)(elsewhere)) == pytest.approx(derivative_elsewhere)
    # On a batch mixing both branches, each point is right.
    points = np.array([0.0, elsewhere, -1.0])
    assert np.allclose(sd.grad(f).trace(0.5)(points), [0.0, derivative_elsewhere, 0.0])


def test_guarded_radius_at_the_origin_in_every_mode():
    origin = np.zeros(2)
    for derivative in (sd.grad, sd.jacfwd, sd.jacrev):
        assert derivative(guarded_radius)(origin).tolist() == [0.0, 0.0]
    assert sd.hessian(guarded_radius)(origin).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert np.allclose(sd.grad(guarded_radius)(np.array([3.0, 4.0])), [0.6, 0.8])
    expected_hessian = np.array([[16.0, -12.0], [-12.0, 9.0]]) / 125   # (I - u u^T) / r
    assert np.allclose(sd.hessian(guarded_radius)(np.array([3.0, 4.0])), expected_hessian)
    # Taylor mode along a direction through the origin (JAX's jacfwd: [0, 0] there too).
    radius_of = lambda a, b: guarded_radius(snp.asarray([a, b]))  # noqa: E731
    series = sd.taylor(radius_of, 3, argnum=(0, 1), direction=(1.0, 1.0))(0.0, 0.0)
    assert [float(c) for c in series] == [0.0, 0.0, 0.0, 0.0]
    series = sd.taylor(radius_of, 2, argnum=(0, 1), direction=(0.6, 0.8))(3.0, 4.0)
    assert [float(c) for c in series] == pytest.approx([5.0, 1.0, 0.0], abs=1e-14)  # along the ray


def test_guarded_sinc_is_smooth_through_zero():
    assert float(sd.grad(guarded_sinc)(0.0)) == 0.0
    assert float(sd.grad(guarded_sinc)(1.0)) == pytest.approx(np.cos(1.0) - np.sin(1.0))


def test_the_masked_gradient_reads_as_a_piecewise():
    F = sd.grad(guarded_sqrt).trace(1.0)
    (x,) = F.inputs
    assert F.formula() == sympy.Piecewise((1 / (2 * sympy.sqrt(x)), x > 0), (0, True))
    F = sd.grad(lambda x: snp.where(x <= 0, 0.0, np.sqrt(x))).trace(1.0)
    (x,) = F.inputs
    assert F.formula() == sympy.Piecewise((0, x <= 0), (1 / (2 * sympy.sqrt(x)), True))


def test_nested_wheres_conjoin_their_conditions():
    def f(x):
        return snp.where(x > 0, snp.where(x < 1, np.sqrt(x) * np.log(x), 1.0), 0.0)

    F = sd.grad(f).trace(0.5)
    (x,) = F.inputs
    inner = sympy.log(x) / (2 * sympy.sqrt(x)) + 1 / sympy.sqrt(x)
    assert F.formula() == sympy.Piecewise((inner, (x > 0) & (x < 1)), (0, True))
    assert [float(v) for v in F(np.array([0.0, 1.0, 2.0]))] == [0.0, 0.0, 0.0]


def test_sums_of_differently_guarded_terms_stay_guarded():
    # Both wheres use the same sqrt(x); their cotangents meet before 1/(2 sqrt(x)).
    def f(x):
        root = np.sqrt(x)
        return snp.where(x > 0, root, 0.0) + snp.where(x > 0.5, 2 * root, 0.0)

    assert float(sd.grad(f)(0.0)) == 0.0
    assert float(sd.grad(f)(1.0)) == pytest.approx(1.5)
    assert float(sd.grad(sd.grad(f))(0.0)) == 0.0


def test_an_unguarded_use_still_propagates_inf_like_ieee():
    # sqrt(x) is used outside the where too: its infinite derivative at 0 is real.
    def f(x):
        return snp.where(x > 0, np.sqrt(x), 0.0) + np.sqrt(x)

    assert float(sd.grad(f)(0.0)) == np.inf


def test_the_double_where_idiom_still_works():
    def double_where(x):
        safe = snp.where(x > 0, x, 1.0)
        return snp.where(x > 0, np.sqrt(safe), 0.0)

    assert float(sd.grad(double_where)(0.0)) == 0.0   # JAX 0.10.2: 0.0
    assert float(sd.grad(double_where)(4.0)) == 0.25


def test_relu_network_gradient_with_guards_matches_finite_differences():
    rng = np.random.default_rng(RNG_SEED)
    w1 = sd.Parameter(rng.normal(size=(6, 4)), name="w1")
    w2 = sd.Parameter(rng.normal(size=(5, 6)), name="w2")

    def net(x):
        hidden = np.maximum(w1 @ x, 0.0)
        out = w2 @ hidden
        return np.sum(snp.where(out > 1, np.sqrt(out), out))

    x = rng.normal(size=4)
    assert np.allclose(sd.grad(net)(x), finite_difference_gradient(net, x), atol=1e-6)
    with np.errstate(invalid="ignore"):  # check_grads runs `net` on NumPy arrays too
        check_grads(net, (x,), order=2, modes=("fwd", "rev"))


# ---------------------------------------------------------------------------
# 5. Nothing a user passes in runs as code
# ---------------------------------------------------------------------------


@pytest.fixture
def canary(tmp_path):
    """A path that exists only if some hostile name was executed."""
    return tmp_path / "executed"


def hostile_names(canary_path):
    command = f"__import__('pathlib').Path({str(canary_path)!r}).touch()"
    return [
        command,
        f'"; {command}; "',
        f"x')\n{command}\n#",
        "\\input{/etc/passwd} \\def\\x{y} $ & % # _ ^ { }",
        "a\\b\\\\c\"d'e",
        f"*/ {command}; /* ??/",
        f"x\r\n{command}\u2028#",
    ]


@pytest.mark.parametrize("which", range(len(hostile_names("canary"))))
def test_hostile_names_flow_through_without_running(canary, which):
    hostile = hostile_names(canary)[which]
    weight = sd.Parameter(np.array([1.0, 2.0]), name=hostile)

    def model(x):
        return np.sum(weight * np.sin(x)) + x[0] ** 2

    F = sd.trace(model, np.ones(2), name=hostile)
    gradient = sd.grad(model, argnums=0, weights=[weight])
    G = gradient.trace(np.ones(2))
    assert float(F.compile("numpy")(np.zeros(2))) == 0.0
    named = F.latex(output_names=[hostile])
    assert named.count("\\begin{aligned}") == 1 and "\\input{/etc" not in named
    for function in (F, G):
        function.formula()
        function.cse()
        text = function.latex()
        assert text.count("\\begin{aligned}") == 1 and text.rstrip().endswith("\\end{aligned}")
        assert "\\input{/etc/passwd}" not in text
    if hasattr(F, "source"):  # the generated evaluator module (compiler branch)
        import ast

        for backend in sd.available_backends():
            source = G.source(backend)
            ast.parse(source)  # well-formed whatever the names
            if backend in ("numpy", "numexpr"):  # numba caches need a real file
                namespace: dict = {}
                exec(compile(source, "<generated>", "exec"), namespace)  # must only define code
                assert callable(namespace.get("run"))
    arg_grad, (weight_grad,) = gradient(np.array([0.0, 1.0]))
    assert np.allclose(arg_grad, [1.0, 2 * np.cos(1.0)])
    assert np.allclose(weight_grad, np.sin([0.0, 1.0]))

    symbol = sympy.Symbol(hostile)
    other = sympy.Symbol(hostile + "2")
    imported = sd.from_sympy(symbol ** 2 * other, [symbol, other], name=hostile)
    assert [float(g) for g in sd.grad(imported, argnums=(0, 1))(3.0, 2.0)] == [12.0, 9.0]
    sd.grad(imported, argnums=(0, 1)).trace(1.0, 1.0).latex()

    custom = sd.primitive(lambda x: x * 2.0, name=hostile)
    custom.defpartials(lambda x: (2.0,))
    assert float(sd.grad(lambda x: custom(x) ** 2)(1.5)) == 12.0
    sd.trace(lambda x: custom(x), 1.0).latex()

    # C export: the names reach comments only, and the file compiles warning-free.
    for function in (F, G):
        source, header = function.to_c("exported")
        for text in (source, header):   # outside its comments, no user text at all
            code = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
            assert "pathlib" not in code and "passwd" not in code and "evil" not in code
        compile_c(source, header, canary.parent)
    with pytest.raises(sd.ExportError):
        F.to_c(hostile)                 # a function name must be a C identifier

    # The command line: as the formula, as a --wrt name, in every output format.
    from symad.cli import main

    for argv in (["diff", hostile, "--wrt", "x"], ["diff", "x * y", "--wrt", "x", hostile],
                 ["hessian", f"x**2 + {hostile}", "--wrt", "x"]):
        for output in ([], ["--latex"], ["--python"], ["--c"]):
            assert main(argv + output) == 2    # refused, not run
    assert not canary.exists()


def compile_c(source, header, directory):
    """Compile an exported function with -Wall -Wextra -Werror (skipped without a compiler)."""
    import shutil
    import subprocess

    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        return
    (directory / "exported.h").write_text(header)
    (directory / "exported.c").write_text('#include "exported.h"\n' + source)
    subprocess.run([compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "-c", "-o",
                    str(directory / "exported.o"), str(directory / "exported.c")],
                   check=True, capture_output=True, text=True)


def test_the_package_never_parses_strings_as_code():
    import ast
    import pathlib

    forbidden = {"eval", "sympify", "parse_expr", "parse_latex"}
    offenders = []
    for path in pathlib.Path(sd.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if called in forbidden:
                    offenders.append(f"{path.name}:{node.lineno} {called}")
    assert offenders == []


# ---------------------------------------------------------------------------
# No exception but a SymadError (or the user's own) escapes from tracing
# ---------------------------------------------------------------------------

MISTAKES = {
    "store into a NumPy slice": lambda v: (lambda o: (o.__setitem__(slice(0, 2), v[:2]), o)[1])(np.zeros(3)),
    "np.array of traced values": lambda v: np.array([v[0], 1.0]),
    "np.asarray": lambda v: np.asarray(v),
    "np.float64 of a traced value": lambda v: np.float64(v[0]),
    "math.sqrt": lambda v: __import__("math").sqrt(v[0]),
    "int()": lambda v: int(v[0]),
    "round()": lambda v: round(v[0]),
    "floor division": lambda v: v[0] // 2,
    "builtin max": lambda v: max(v[0], v[1]),
    "sorted": lambda v: sorted(v)[0],
    "dict key": lambda v: {v[0]: 1.0}[v[0]],
    "format spec": lambda v: float(f"{v[0]:.3f}"),
    "complex constant": lambda v: v[0] * 1j,
    "string operand": lambda v: v[0] + "a",
    "None operand": lambda v: v[0] + None,
    "ufunc out=": lambda v: np.sin(v, out=np.zeros(3)),
    "ufunc where=": lambda v: np.sin(v, where=True),
    "boolean mask index": lambda v: v[v > 0],
    "traced index": lambda v: v[v[0]],
    "matmul shapes": lambda v: v @ np.ones(4),
    "reshape size": lambda v: v.reshape(2, 2),
    "axis out of range": lambda v: v.sum(axis=3),
    "concatenate ranks": lambda v: np.concatenate([v, np.ones((2, 2))]),
    "returns a string": lambda v: "loss",
    "np.isnan": lambda v: np.isnan(v),
    "np.argpartition kth past the end": lambda v: v[np.argpartition(v, 5)],  # (kth=1 traces now)
    "ndarray.argmax": lambda v: v.argmax(),
    "ndarray.nonzero": lambda v: v.nonzero(),
    "np.vectorize": lambda v: np.vectorize(lambda a: a * 2)(v),
    "np.linalg.eigvals": lambda v: np.linalg.eigvals(np.diag(v)),
    # More of what research scripts get wrong (the figure of issue 9: only SymadErrors).
    "store into an int array": lambda v: (lambda o: (o.__setitem__(0, v[0]), o)[1])(np.zeros(3, dtype=int)),
    "store a whole slice": lambda v: (lambda o: (o.__setitem__(slice(None), v), o)[1])(np.empty(3)),
    "np.array(dtype=float)": lambda v: np.array(v, dtype=float),
    "np.array of tolist": lambda v: np.array(v.tolist()),
    "x in list": lambda v: float(v[0] in [1.0, 2.0]),
    "list.index": lambda v: [1.0, 2.0].index(v[0]),
    "math.exp": lambda v: __import__("math").exp(v[0]),
    "np.float32()": lambda v: np.float32(v[0]),
    "scipy.special.hyp2f1": lambda v: __import__("scipy.special").special.hyp2f1(1.0, 1.0, 2.0, v * 0.1),
    "scipy.integrate.quad": lambda v: __import__("scipy.integrate").integrate.quad(lambda t: v[0] * t, 0, 1)[0],
    "scipy.optimize.minimize": lambda v: __import__("scipy.optimize").optimize.minimize(
        lambda t: (t - v[0]) ** 2, 0.0).x,
    "np.linalg.eig": lambda v: np.linalg.eig(np.diag(v))[0],
    "np.polyfit": lambda v: np.polyfit([0.0, 1.0, 2.0], v, 1),
    "np.random.normal(traced)": lambda v: np.random.normal(v),
    "% formatting": lambda v: float("%.3f" % v[0]),  # noqa: UP031  (the mistake under test)
    "str.format spec": lambda v: float("{:.2f}".format(v[0])),  # noqa: UP032  (under test)
    "round(x, 2)": lambda v: round(v[0], 2),
    "axis 1 on a vector": lambda v: np.sum(v, axis=1),
    "index out of bounds": lambda v: v[5],
    "float index": lambda v: v[1.5],
    "too many indices": lambda v: v[0, 0],
    "reshape(-1, 4)": lambda v: v.reshape(-1, 4),
    "np.dot shapes": lambda v: np.dot(v, np.ones((2, 2))),
    "one-argument np.where": lambda v: v[np.where(v > 0)],
    "np.maximum(x, None)": lambda v: np.maximum(v, None),
    "matmul of scalars": lambda v: v[0] @ v[1],
    "astype(bool)": lambda v: np.sin(v).astype(bool),
    "stack shapes": lambda v: np.stack([v, v[:2]]),
    "duplicate axis": lambda v: np.mean(v, axis=(0, 0)),
    "float axis": lambda v: v.sum(axis=1.5),
    "power by a string": lambda v: v ** "2",
    "power shapes": lambda v: np.power(v, [1.0, 2.0]),
    "compare with None": lambda v: v < None,
    "np.histogram": lambda v: np.histogram(v)[0],
    "np.searchsorted": lambda v: np.searchsorted([0.0, 1.0], v),
    "np.unique": lambda v: np.unique(v),
    "if np.isfinite(x).all()": lambda v: v if np.isfinite(v).all() else v,
    "np.nanmean": lambda v: np.nanmean(v),
    "ndarray.view": lambda v: v.view(np.int64),
    "ndarray.flat": lambda v: v.flat[0],
    "iterate a scalar": lambda v: list(iter(v[0])),
    "np.zeros(traced)": lambda v: np.zeros(v),
    "range(traced)": lambda v: sum(range(v[0])),
    "list[traced]": lambda v: [1.0, 2.0, 3.0][v[0]],
    "NumPy array masked by traced": lambda v: np.ones(3)[v > 0],
    "NumPy array indexed by traced": lambda v: np.ones(3)[v[0]],
    "astype(complex)": lambda v: v.astype(complex),
    "np.exp(1j * x)": lambda v: np.exp(1j * v),
    "if x.any()": lambda v: v if v.any() else v,
    "np.testing.assert_allclose": lambda v: (np.testing.assert_allclose(v, 1.0), v)[1],
    "builtin min over a vector": lambda v: min(v),
    "dict.get": lambda v: {1.0: 2.0}.get(v[0], 0.0),
    "set of traced values": lambda v: len({v[0], v[1]}),
    "functools.lru_cache": lambda v: __import__("functools").lru_cache()(lambda t: t * 2)(v[0]),
    "norm ord='nuc' of a vector": lambda v: np.linalg.norm(v, ord="nuc"),
    "np.sum(initial=)": lambda v: np.sum(v, initial=1.0),
    "np.cumsum(dtype=int)": lambda v: np.cumsum(v, dtype=int),
    "np.add.at": lambda v: np.add.at(v, [0], 1.0),
    "np.multiply.outer": lambda v: np.multiply.outer(v, v),
    "np.add.accumulate": lambda v: np.add.accumulate(v),
    "np.frompyfunc": lambda v: np.frompyfunc(lambda a: a * 2, 1, 1)(v),
    "np.apply_along_axis": lambda v: np.apply_along_axis(np.sum, 0, v),
    "nested grad of an int": lambda v: sd.grad(lambda t: t ** 2)(3),
    "nested has_aux without aux": lambda v: sd.grad(lambda t: t ** 2, has_aux=True)(v[0]),
    "np.divide(where=)": lambda v: np.divide(v, v, where=v != 0),
    "Parameter of a string": lambda v: v * sd.Parameter("abc"),
    "broadcast (3, 1) + (2, 1)": lambda v: v.reshape(3, 1) + np.ones((2, 1)),
    "ndarray.sum(where=)": lambda v: v.sum(where=v > 0),
    "ndarray.max(initial=)": lambda v: v.max(initial=0.0),
    "x.item()": lambda v: v[0].item(),
}


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_a_corpus_of_mistakes_raises_only_symad_errors(name):
    def model(v):
        result = MISTAKES[name](v)
        return result if isinstance(result, str) else np.sum(result)

    with pytest.raises(sd.SymadError) as info:
        sd.grad(model)(np.array([1.0, 2.0, 3.0]))
    message = str(info.value)
    assert "model" in message or "<lambda>" in message or message.startswith("Parameter 'param")
    assert active_builders() == []


def test_missing_ndarray_attributes_are_clear_but_hasattr_still_works():
    def f(v):
        assert not hasattr(v, "argmax") and not hasattr(v, "no_such_thing")
        assert v.real is v and v.conj() is v
        return v.imag + v

    assert sd.trace(f, np.ones(2))(np.array([1.0, 2.0])).tolist() == [1.0, 2.0]
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        sd.trace(lambda v: v.no_such_thing, np.ones(2))


def test_one_evaluator_called_from_eight_threads_matches_serial_calls():
    from concurrent.futures import ThreadPoolExecutor

    G = sd.grad(lambda x: np.sum(snp.where(x > 0, np.sqrt(x), 0.0) * np.sin(x))).trace(np.ones(3))
    rng = np.random.default_rng(RNG_SEED)
    batches = [rng.uniform(-1, 2, size=(2000, 3)) for _ in range(16)]
    serial = [G(batch) for batch in batches]
    with ThreadPoolExecutor(max_workers=8) as pool:
        threaded = list(pool.map(G, batches))
    for expected, actual in zip(serial, threaded):
        assert np.array_equal(expected, actual)


def test_two_threads_tracing_at_the_same_moment_keep_their_graphs_apart():
    import threading

    # Both traces are paused half-way at a barrier, so they are open at once.
    barrier = threading.Barrier(2, timeout=30)

    def first(x):
        a = np.sin(x) * 3.0
        barrier.wait()
        return a + np.exp(x)

    def second(y):
        b = y ** 3
        barrier.wait()
        return b - np.cos(y)

    results = {}

    def run(key, function):
        results[key] = sd.grad(function).trace(0.0)

    threads = [threading.Thread(target=run, args=("first", first)),
               threading.Thread(target=run, args=("second", second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (x,) = results["first"].inputs
    (y,) = results["second"].inputs
    assert sympy.simplify(results["first"].formula() - (3 * sympy.cos(x) + sympy.exp(x))) == 0
    assert sympy.simplify(results["second"].formula() - (3 * y ** 2 + sympy.sin(y))) == 0
    assert results["first"].formula().free_symbols == {x}
    assert results["second"].formula().free_symbols == {y}
    assert active_builders() == []


def test_threaded_evaluations_leave_numexpr_global_thread_count_as_the_user_set_it():
    from concurrent.futures import ThreadPoolExecutor

    numexpr = pytest.importorskip("numexpr")
    G = sd.grad(lambda x: np.sum(np.sin(x) * np.exp(-x * x))).trace(np.ones(2))
    rng = np.random.default_rng(RNG_SEED)
    batches = [rng.normal(size=(40_000, 2)) for _ in range(8)]  # above the switching size
    original = numexpr.set_num_threads(1)      # the user's own numexpr setting
    previous = sd.set_num_threads(2)           # symad's differs, so every call switches
    try:
        serial = [G(batch) for batch in batches]
        assert numexpr.get_num_threads() == 1
        with ThreadPoolExecutor(max_workers=8) as pool:
            threaded = list(pool.map(G, batches))
        assert numexpr.get_num_threads() == 1
        assert all(np.array_equal(a, b) for a, b in zip(serial, threaded))
        assert numexpr.evaluate("2 * a", local_dict={"a": np.ones(3)}).tolist() == [2.0] * 3
    finally:
        sd.set_num_threads(previous)
        numexpr.set_num_threads(original)


# ---------------------------------------------------------------------------
# 7. dtypes and edge values (the table in docs/api.md)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", sd.available_backends())
def test_float32_in_float32_out_for_every_transform_and_backend(backend):
    def f(v, n):
        return np.sum(np.sin(v) * v ** n)

    x32 = np.array([0.5, 1.5], dtype=np.float32)
    G = sd.grad(f).trace(np.ones(2), 2.0)
    assert G.compile(backend)(x32, np.float32(2.0)).dtype == np.float32
    assert G.compile(backend)(x32, 2).dtype == np.float64      # not every input is float32
    assert G.compile(backend)(x32, np.int64(2)).dtype == np.float64
    assert G.compile(backend)(x32.astype(np.float16), 2.0).dtype == np.float64
    assert np.allclose(G.compile(backend)(x32, np.float32(2)), G(x32.astype(np.float64), 2.0), rtol=1e-6)
    if backend == "numexpr":   # the default backend, behind every transform
        assert sd.grad(f)(x32, np.float32(2)).dtype == np.float32
        assert sd.hessian(lambda v: f(v, 3))(x32).dtype == np.float32
        assert sd.jvp(lambda v: f(v, 3), (x32,), (x32,))[1].dtype == np.float32
        assert sd.derivative(np.sin, 3)(x32).dtype == np.float32
        assert sd.taylor(np.sin, 2)(x32)[2].dtype == np.float32
        assert sd.vmap(lambda v: v * 2)(x32).dtype == np.float32


def test_integers_are_refused_where_differentiated_and_cast_elsewhere():
    def f(x, n):
        return x ** n

    with pytest.raises(sd.DifferentiationError, match=r"argument 'x' \(position 0\).*int64.*2.0 rather than 2"):
        sd.grad(f)(2, 3.0)
    assert float(sd.grad(f)(2.0, 3)) == 12.0                      # n is cast to float
    with pytest.raises(sd.TracingError, match="floordiv"):
        sd.grad(lambda x: x // 2)(3.0)


def test_removable_singularities_and_cancellation_return_what_the_docs_say():
    with np.errstate(all="ignore"):
        sinc = sd.trace(lambda x: np.sin(x) / x, 1.0)
        assert np.isnan(float(sinc(0.0))) and float(sinc(1e-8)) == 1.0
        assert np.isnan(float(sd.grad(lambda x: np.sin(x) / x)(0.0)))
        normalized = lambda x: np.sinc(x / np.pi)  # noqa: E731
        assert float(sd.trace(normalized, 1.0)(0.0)) == 1.0
        assert float(sd.grad(normalized)(0.0)) == 0.0
        assert float(sd.derivative(normalized, 2)(0.0)) == pytest.approx(-1 / 3, rel=1e-15)

        cancels = sd.trace(lambda x: (1 - np.cos(x)) / x ** 2, 1.0)
        assert float(cancels(1e-8)) == 0.0                           # the true value is 1/2
        assert float(cancels(1e-6)) == pytest.approx(0.5, rel=1e-3)
        assert float(cancels(1e-6)) != pytest.approx(0.5, rel=1e-5)  # four digits only
        rewritten = sd.trace(lambda x: 2 * np.sin(x / 2) ** 2 / x ** 2, 1.0)
        assert float(rewritten(1e-8)) == pytest.approx(0.5, rel=1e-15)

        assert float(sd.trace(lambda x: np.log(1 + x), 1.0)(1e-17)) == 0.0
        assert float(sd.trace(np.log1p, 1.0)(1e-17)) == 1e-17
        assert float(sd.derivative(np.log1p, 3)(1e-17)) == 2.0      # 2/(1+x)^3
        assert float(sd.trace(lambda x: np.exp(x) - 1, 1.0)(1e-17)) == 0.0
        assert float(sd.trace(np.expm1, 1.0)(1e-17)) == 1e-17

        assert float(sd.trace(lambda x: np.log1p(np.exp(x)), 1.0)(800.0)) == np.inf
        assert np.isnan(float(sd.grad(lambda x: np.log1p(np.exp(x)))(800.0)))
        assert float(sd.trace(snp.softplus, 1.0)(800.0)) == 800.0
        assert float(sd.grad(snp.softplus)(800.0)) == 1.0

        assert np.isnan(float(sd.trace(lambda x: x * np.log(x), 1.0)(0.0)))
        assert float(sd.trace(guarded_xlogx, 1.0)(0.0)) == 0.0
        import scipy.special

        assert float(sd.trace(lambda x: scipy.special.xlogy(x, x), 1.0)(0.0)) == 0.0


@pytest.mark.parametrize("backend", sd.available_backends())
def test_functions_and_evaluators_pickle_by_their_graph_not_by_code(backend):
    import pickle

    from symad.custom import CUSTOM_PRIMITIVES

    w = sd.Parameter(np.array([1.0, 2.0]), name="w")
    squash = sd.primitive(lambda x: x / (1 + np.abs(x)), name="squash_for_pickle")
    squash.defpartials(lambda x: (1 / (1 + abs(x)) ** 2,))

    def model(x):
        return np.sum(w * np.sin(x)) + snp.where(x[1] > 0, squash(x[1]), 0.0)

    F = sd.trace(model, np.ones(2))           # holds the custom primitive's node
    G = sd.grad(model).trace(np.ones(2))      # its partials are formulas: no such node
    point = np.array([0.5, 1.0])
    for original in (F, G, F.compile(backend), G.compile(backend)):
        data = pickle.dumps(original)
        for code_marker in (b"def ", b"import", b"lambda", b"evaluate(", b"run("):
            assert code_marker not in data
        loaded = pickle.loads(data)
        assert np.array_equal(loaded(point), original(point))
    assert pickle.loads(pickle.dumps(G)).formula() == G.formula()
    # A custom primitive is found by name; without it, loading says what is missing.
    data = pickle.dumps(F)
    saved = CUSTOM_PRIMITIVES.pop("squash_for_pickle")
    try:
        with pytest.raises(sd.TracingError, match="squash_for_pickle"):
            pickle.loads(data)
    finally:
        CUSTOM_PRIMITIVES["squash_for_pickle"] = saved


def test_a_transform_refuses_pickling_and_points_to_its_traced_function():
    import pickle

    G = sd.grad(lambda t: t**3)
    with pytest.raises(TypeError, match=r"cannot be pickled.*\.trace\(example_args\)"):
        pickle.dumps(G)
    loaded = pickle.loads(pickle.dumps(G.trace(2.0)))
    assert float(loaded(2.0)) == 12.0
    import copy

    assert copy.deepcopy({"gradient": G})["gradient"] is G  # copied as functions are


@pytest.mark.parametrize("transform", [
    sd.grad, sd.value_and_grad, sd.jacfwd, sd.jacrev, sd.hessian,
    lambda f: sd.derivative(f, 2), lambda f: sd.vmap(sd.grad(f)),
])
@pytest.mark.parametrize("mistake", ["shape", "unsupported", "store", "own"])
def test_the_same_transform_works_once_the_mistake_is_fixed(transform, mistake):
    broken = {"flag": True}

    def f(v):
        if broken["flag"]:
            if mistake == "shape":
                return np.sum(v @ np.ones((4, 2)))
            if mistake == "unsupported":
                return np.sum(np.histogram(v)[0] * v)
            if mistake == "store":
                out = np.zeros(3)
                out[0] = v[0]
                return np.sum(out)
            raise KeyError("the user's own")
        return np.sum(v ** 3)

    derived = transform(f)
    x = np.array([1.0, 2.0, 3.0])
    for _ in range(2):   # the same error twice: nothing half-built was cached
        with pytest.raises(KeyError if mistake == "own" else sd.SymadError):
            derived(x)
        assert active_builders() == []
    broken["flag"] = False
    result = derived(x)
    reference = {sd.grad: 3 * x ** 2, sd.jacfwd: 3 * x ** 2, sd.jacrev: 3 * x ** 2,
                 sd.hessian: np.diag(6 * x)}.get(transform)
    if reference is not None:
        assert np.allclose(result, reference)
    elif transform is sd.value_and_grad:
        assert np.allclose(result[1], 3 * x ** 2)


@pytest.mark.parametrize("call, hint", [
    (lambda v: np.sum(np.trapezoid(v)), "np.sum((y[1:] + y[:-1]) / 2 * np.diff(t))"),
    (lambda v: np.sum(np.linalg.matrix_rank(np.diag(v))), "@sd.primitive"),
])
def test_untraceable_grid_and_linear_algebra_calls_get_a_rewrite_not_a_near_name(call, hint):
    with pytest.raises(sd.TracingError) as info:
        sd.grad(call)(np.ones(3))
    message = str(info.value)
    assert hint in message and "nearest operations" not in message


def test_a_nested_list_for_an_array_gets_a_short_message():
    F = sd.trace(lambda u: np.sum(u ** 2), np.zeros((100, 100)))
    with pytest.raises(sd.TracingError) as info:
        F(np.zeros((100, 100)).tolist())
    message = str(info.value)
    assert len(message) < 500 and "(100 items)" in message and "np.asarray" in message


@pytest.mark.parametrize("call, unsupported, says", [
    (lambda a: np.linalg.matrix_rank(a), "numpy.linalg.matrix_rank", "It is not traced yet"),
    (lambda a: np.linalg.tensorinv(a), "numpy.linalg.tensorinv", "symad traces numpy.linalg's solve"),
    (lambda a: np.linalg.cond(a), "numpy.linalg.cond", "It is not traced yet"),
])
def test_linear_algebra_suggests_no_unrelated_near_names(call, unsupported, says):
    # np.linalg.inv once suggested "np.sin, np.min, np.invert".
    with pytest.raises(sd.TracingError) as info:
        sd.grad(lambda a: np.sum(call(a)))(np.eye(2))
    message = str(info.value)
    assert unsupported in message and says in message and "@sd.primitive" in message
    assert "nearest operations" not in message and "np.invert" not in message


@pytest.mark.parametrize("call, equivalent", [
    (lambda v: scipy.special.logsumexp(v), "snp.logsumexp(x, axis=..., keepdims=...)"),
    (lambda v: np.sum(scipy.special.softmax(v)), "np.exp(x - snp.logsumexp(x"),
    (lambda v: np.sum(scipy.special.log_softmax(v)), "x - snp.logsumexp(x"),
])
def test_scipy_logsumexp_points_to_snp_logsumexp(call, equivalent):
    with pytest.raises(sd.TracingError) as info:
        sd.grad(call)(np.ones(3))
    message = str(info.value)
    assert "<lambda>" in message and equivalent in message and "scipy.special." in message


def test_integer_labels_passed_as_an_argument_explain_why_and_what_to_do():
    def loss(logits, y):
        return -np.sum(logits[np.arange(3), y])

    labels, logits = np.array([0, 1, 1]), np.ones((3, 2))
    with pytest.raises(sd.TracingError) as info:
        sd.grad(loss)(logits, labels)
    message = str(info.value)
    assert "arguments of a traced function are symbolic, integer ones too" in message
    assert "sd.Parameter" in message and "close over the labels" in message and "one-hot" in message
    # Both fixes the message gives work.
    expected = -np.eye(2)[labels]
    np.testing.assert_array_equal(sd.grad(lambda x: loss(x, labels))(logits), expected)
    one_hot = np.eye(2)[labels]
    np.testing.assert_array_equal(
        sd.grad(lambda x, Y: -np.sum(np.sum(x * Y, axis=1)))(logits, one_hot), expected)
