"""symad.special: SciPy's special functions traced, checked like every other primitive.

* a spec table (as in tests/test_primitives.py) drives values against SciPy, scalar and
  batch, through ``symad.special`` and through plain ``scipy.special`` calls, and
  ``check_grads(order=2, modes=("fwd", "rev"))`` on each function's valid domain;
* exact symbolic partial rules;
* ufunc routing by identity, and errors that name ``scipy.special`` and the fix;
* derivatives w.r.t. constant parameters (orders, shapes) refused clearly;
* nesting (grad of grad) agrees with ``sd.derivative``.

Orders 1-4 against mpmath at 30 digits are in tests/test_special_accuracy.py.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import mpmath
import numpy as np
import pytest
import scipy.special as sc
import sympy

import symad as sd
import symad.numpy as snp
import symad.special as ssp
from symad.testing import check_grads

# ---------------------------------------------------------------------------
# The spec table
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One special function: traced (symad.special), its SciPy spelling, and a domain.

    ``fn`` and ``scipy_fn`` take the differentiated arguments only (constant orders and
    shapes are fixed in the lambda); ``domain`` is one ``(low, high)`` per argument.
    """

    name: str
    fn: Callable
    scipy_fn: Callable
    domain: tuple
    # scipy.special.polygamma and spherical_jn are Python functions that call np.asarray on
    # their arguments, which no traced value survives: use symad.special's.
    scipy_traces: bool = True

    def __repr__(self) -> str:
        return self.name


ROWS = [
    Row("gamma", ssp.gamma, sc.gamma, ((0.2, 4.0),)),
    Row("gamma_negative", ssp.gamma, sc.gamma, ((-2.9, -2.1),)),
    Row("gammaln", ssp.gammaln, sc.gammaln, ((0.2, 30.0),)),
    Row("digamma", ssp.digamma, sc.digamma, ((0.2, 10.0),)),
    Row("psi", ssp.psi, sc.psi, ((0.2, 10.0),)),
    Row("polygamma", lambda x: ssp.polygamma(2, x), lambda x: sc.polygamma(2, x), ((0.3, 5.0),), False),
    Row("beta", ssp.beta, sc.beta, ((0.3, 4.0), (0.3, 4.0))),
    Row("betaln", ssp.betaln, sc.betaln, ((0.3, 40.0), (0.3, 40.0))),
    Row("betainc", lambda x: ssp.betainc(2.5, 1.5, x), lambda x: sc.betainc(2.5, 1.5, x), ((0.1, 0.9),)),
    Row("poch", ssp.poch, sc.poch, ((0.5, 3.0), (-0.4, 2.0))),
    Row("gammainc", lambda x: ssp.gammainc(2.5, x), lambda x: sc.gammainc(2.5, x), ((0.2, 6.0),)),
    Row("gammaincc", lambda x: ssp.gammaincc(2.5, x), lambda x: sc.gammaincc(2.5, x), ((0.2, 6.0),)),
    Row("erfinv", ssp.erfinv, sc.erfinv, ((-0.9, 0.9),)),
    Row("erfcinv", ssp.erfcinv, sc.erfcinv, ((0.1, 1.9),)),
    Row("ndtr", ssp.ndtr, sc.ndtr, ((-4.0, 4.0),)),
    Row("log_ndtr", ssp.log_ndtr, sc.log_ndtr, ((-6.0, 4.0),)),
    Row("ndtri", ssp.ndtri, sc.ndtri, ((0.05, 0.95),)),
    Row("expit", ssp.expit, sc.expit, ((-5.0, 5.0),)),
    Row("logit", ssp.logit, sc.logit, ((0.05, 0.95),)),
    Row("xlogy", ssp.xlogy, sc.xlogy, ((-2.0, 2.0), (0.2, 3.0))),
    Row("xlog1py", ssp.xlog1py, sc.xlog1py, ((-2.0, 2.0), (-0.7, 3.0))),
    Row("j0", ssp.j0, sc.j0, ((0.1, 20.0),)),
    Row("j1", ssp.j1, sc.j1, ((0.1, 20.0),)),
    Row("jv", lambda x: ssp.jv(2.5, x), lambda x: sc.jv(2.5, x), ((0.1, 20.0),)),
    Row("jn", lambda x: ssp.jn(3, x), lambda x: sc.jn(3, x), ((0.1, 20.0),)),
    Row("y0", ssp.y0, sc.y0, ((0.3, 20.0),)),
    Row("y1", ssp.y1, sc.y1, ((0.3, 20.0),)),
    Row("yv", lambda x: ssp.yv(1.5, x), lambda x: sc.yv(1.5, x), ((0.3, 20.0),)),
    Row("i0", ssp.i0, sc.i0, ((0.1, 10.0),)),
    Row("i1", ssp.i1, sc.i1, ((0.1, 10.0),)),
    Row("iv", lambda x: ssp.iv(2.5, x), lambda x: sc.iv(2.5, x), ((0.1, 10.0),)),
    Row("k0", ssp.k0, sc.k0, ((0.2, 10.0),)),
    Row("k1", ssp.k1, sc.k1, ((0.2, 10.0),)),
    Row("kv", lambda x: ssp.kv(1.5, x), lambda x: sc.kv(1.5, x), ((0.2, 10.0),)),
    Row("spherical_jn", lambda x: ssp.spherical_jn(2, x), lambda x: sc.spherical_jn(2, x), ((0.0, 10.0),), False),
    Row("zeta", ssp.zeta, sc.zeta, ((1.3, 6.0),)),
    Row("zeta_negative", ssp.zeta, sc.zeta, ((-6.0, 0.8),)),
    Row("zeta_hurwitz", ssp.zeta, sc.zeta, ((1.5, 5.0), (0.5, 3.0))),
    Row("lambertw", ssp.lambertw, lambda x: sc.lambertw(x).real, ((-0.3, 10.0),)),
    Row("ellipk", ssp.ellipk, sc.ellipk, ((-3.0, 0.95),)),
    Row("ellipe", ssp.ellipe, sc.ellipe, ((-3.0, 0.95),)),
    Row("sinc", ssp.sinc, np.sinc, ((-3.0, 3.0),)),
]
ROWS_BY_NAME = {row.name: row for row in ROWS}

#: Every function issue 10 names has a row.
REQUIRED = """gamma gammaln digamma psi polygamma beta betaln gammainc gammaincc erfinv erfcinv
ndtr log_ndtr ndtri expit logit xlogy xlog1py j0 j1 jv y0 y1 yv i0 i1 iv k0 k1 kv zeta
lambertw ellipk ellipe sinc""".split()


def _seed(*names) -> int:
    return zlib.crc32("/".join(names).encode())


def sample(row: Row, rng: np.random.Generator, shape=()) -> tuple:
    args = tuple(rng.uniform(low, high, size=shape) for low, high in row.domain)
    return tuple(float(a) for a in args) if shape == () else args


def test_table_covers_the_issue():
    assert set(REQUIRED) <= set(ROWS_BY_NAME)
    assert all(callable(getattr(ssp, name)) for name in REQUIRED)


# ---------------------------------------------------------------------------
# Values: traced, through SciPy's own spelling, scalar and batch
# ---------------------------------------------------------------------------


def _check_values(fn, row: Row):
    rng = np.random.default_rng(_seed("values", row.name))
    F = sd.trace(fn, *sample(row, rng))
    point = sample(row, rng)
    value = F(*point)
    assert np.ndim(value) == 0
    np.testing.assert_allclose(value, row.scipy_fn(*point), rtol=1e-13, atol=1e-15)
    batch = sample(row, rng, shape=(7,))
    values = F(*batch)
    assert values.shape == (7,) and values.dtype == np.float64
    np.testing.assert_allclose(values, row.scipy_fn(*batch), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("row", ROWS, ids=repr)
def test_values(row):
    _check_values(row.fn, row)


@pytest.mark.parametrize("row", [row for row in ROWS if row.scipy_traces], ids=repr)
def test_values_scipy_spelling(row):
    # Plain scipy.special (and numpy.sinc) calls on traced values dispatch to symad.special.
    _check_values(row.scipy_fn, row)


def test_scipy_functions_that_convert_with_asarray_say_so():
    with pytest.raises(sd.TracingError, match="converts a traced value to a NumPy array"):
        sd.grad(lambda x: sc.polygamma(2, x))(0.5)
    np.testing.assert_allclose(sd.grad(lambda x: ssp.polygamma(2, x))(0.5), sc.polygamma(3, 0.5))


def test_concrete_inputs_compute_like_scipy():
    xs = np.array([0.3, 2.5, 7.0])
    np.testing.assert_array_equal(ssp.gamma(xs), sc.gamma(xs))
    np.testing.assert_array_equal(ssp.jv(1.5, xs), sc.jv(1.5, xs))
    assert float(ssp.zeta(2.0)) == sc.zeta(2.0)
    np.testing.assert_array_equal(ssp.lambertw(np.array([-1.0, 0.5])), [np.nan, sc.lambertw(0.5).real])


# ---------------------------------------------------------------------------
# Derivatives up to order 2 against finite differences
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("row", ROWS, ids=repr)
def test_grads(row):
    rng = np.random.default_rng(_seed("grads", row.name))
    check_grads(row.fn, sample(row, rng), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("name", ["gamma", "jv", "beta", "log_ndtr", "lambertw", "zeta_hurwitz"])
def test_grads_scipy_spelling_vector_args(name):
    row = ROWS_BY_NAME[name]
    rng = np.random.default_rng(_seed("grads-vec", name))
    check_grads(row.scipy_fn, sample(row, rng, shape=(3,)), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("name", ["gamma", "jv", "erfinv", "lambertw", "ellipk", "sinc"])
def test_nested_grad_is_the_second_derivative(name):
    row = ROWS_BY_NAME[name]
    point = sample(row, np.random.default_rng(_seed("nested", name)))[0]
    nested = sd.grad(sd.grad(row.fn))(point)
    np.testing.assert_allclose(nested, sd.derivative(row.fn, 2)(point), rtol=1e-13)


def _every_row(t):
    """Every row's function at a point of its domain moving with t in [0, 1], stacked."""
    return snp.stack([row.fn(*[low + (high - low) * (0.2 + 0.6 * t) for low, high in row.domain])
                      for row in ROWS])


def test_every_backend_and_float32_compute_the_third_derivative():
    # One compiled graph holds every primitive and the helper primitives of its rules
    # (series, tails, differences); numexpr falls back to SciPy for what it lacks.
    third = sd.derivative(_every_row, 3)
    F = third.trace(0.5)
    t = np.linspace(0.0, 1.0, 9)  # exact in float32 too
    expected = np.array([third(point) for point in t])
    scale = np.abs(expected).max(axis=0)
    assert sd.available_backends()[:2] == ["numexpr", "numpy"]
    for backend in sd.available_backends():
        evaluate = F.compile(backend)
        values = evaluate(t)
        assert values.shape == (9, len(ROWS)) and values.dtype == np.float64
        assert np.all(np.abs(values - expected) <= 1e-13 * scale)
        single = evaluate(t.astype(np.float32))
        assert single.dtype == np.float32, backend
        # float32 arithmetic through third-derivative graphs: 1.2e-4 of each column's size
        assert np.all(np.abs(single - expected) <= 1e-3 * scale), backend


# ---------------------------------------------------------------------------
# Exact partial rules
# ---------------------------------------------------------------------------

x = sympy.Symbol("x")
v = sympy.Symbol("v")
a = sympy.Symbol("a")

EXACT_DERIVATIVES = {
    "gamma": (lambda x: ssp.gamma(x), sympy.gamma(x) * sympy.polygamma(0, x)),
    "gammaln": (lambda x: ssp.gammaln(x), sympy.polygamma(0, x)),
    "digamma": (lambda x: ssp.digamma(x), sympy.polygamma(1, x)),
    "polygamma": (lambda x: ssp.polygamma(3, x), sympy.polygamma(4, x)),
    "erfinv": (lambda x: ssp.erfinv(x), sympy.sqrt(sympy.pi) / 2 * sympy.exp(sympy.erfinv(x) ** 2)),
    "erfcinv": (lambda x: ssp.erfcinv(x), -sympy.sqrt(sympy.pi) / 2 * sympy.exp(sympy.erfcinv(x) ** 2)),
    "ndtr": (lambda x: ssp.ndtr(x), sympy.exp(-(x**2) / 2) / sympy.sqrt(2 * sympy.pi)),
    "ndtri": (lambda x: ssp.ndtri(x), sympy.sqrt(2 * sympy.pi) * sympy.exp(ssp.sympy_ndtri(x) ** 2 / 2)),
    "logit": (lambda x: ssp.logit(x), 1 / (x * (1 - x))),
    "j0": (lambda x: ssp.j0(x), -sympy.besselj(1, x)),
    "k0": (lambda x: ssp.k0(x), -sympy.besselk(1, x)),
    "i0": (lambda x: ssp.i0(x), sympy.besseli(1, x)),
    "y0": (lambda x: ssp.y0(x), -sympy.bessely(1, x)),
    "j1": (lambda x: ssp.j1(x), sympy.besselj(0, x) / 2 - sympy.besselj(2, x) / 2),
    "lambertw": (
        lambda x: ssp.lambertw(x),
        # 1 + W is its own primitive (accurate next to -1/e), which rewrites to 1 + W
        sympy.exp(-sympy.LambertW(x)) / ssp.lambertw1p(x),
    ),
    "zeta": (lambda x: ssp.zeta(x), ssp.sympy_zeta_derivative(1, x, 1)),
}


@pytest.mark.parametrize("name", list(EXACT_DERIVATIVES))
def test_exact_first_derivative(name):
    f, expected = EXACT_DERIVATIVES[name]
    formula = sd.grad(f).trace(0.5).formula()
    assert sympy.simplify(formula - expected) == 0
    assert formula == expected or formula.expand() == expected.expand()


def test_exact_sinc_rule_on_both_branches():
    # -pi j_1(pi x) for |x| < 1/2 (no 0/0 at 0), (cos(pi x) - sinc(x))/x beyond (no rounding
    # of pi x): the same derivative, checked at 30 digits on either side of 1/2.
    formula = sd.grad(ssp.sinc).trace(0.5).formula().rewrite(sympy.cos)
    expected = sympy.diff(sympy.sinc(sympy.pi * x), x)
    for point in [sympy.Rational(1, 10), sympy.Rational(49, 100), sympy.Rational(1, 2),
                  sympy.Rational(7, 3), sympy.Rational(-1000001, 10)]:
        got = formula.subs(x, point).evalf(30)
        assert abs(got - expected.subs(x, point).evalf(30)) < sympy.Float(1e-28) * (1 + abs(got))


def test_exact_rules_on_either_side_of_a_branch():
    # log_ndtr' is pdf/Phi as one exponential, but the Mills-ratio continued fraction in the
    # far left tail; ellipk' is its closed form, but a series primitive near m = 0.
    formula = sd.grad(ssp.log_ndtr).trace(0.5).formula()
    body = sympy.exp(-(x**2) / 2 - ssp.sympy_log_ndtr(x)) / sympy.sqrt(2 * sympy.pi)
    half = sympy.Rational(1, 2)
    assert formula.subs(x, half) == body.subs(x, half)
    assert formula.subs(x, -5) == 5 + ssp.mills_excess(0, 5)
    m = sympy.Symbol("m")  # ellipk's parameter, as in SciPy
    formula = sd.grad(ssp.ellipk).trace(0.5).formula()
    closed = (sympy.elliptic_e(m) - (1 - m) * sympy.elliptic_k(m)) / (2 * m * (1 - m))
    assert sympy.simplify(formula.subs(m, half) - closed.subs(m, half)) == 0
    assert formula.subs(m, sympy.Rational(1, 20)) == ssp.elliptic_k_derivative(1, sympy.Rational(1, 20))


def test_exact_bessel_rule_with_symbolic_order():
    dx = sd.grad(ssp.jv, argnums=1).trace(2.5, 0.5).formula()
    assert dx == (sympy.besselj(v - 1, x) - sympy.besselj(v + 1, x)) / 2
    dk = sd.grad(ssp.kv, argnums=1).trace(2.5, 0.5).formula()
    assert dk == -(sympy.besselk(v - 1, x) + sympy.besselk(v + 1, x)) / 2


def test_gamma_rule_reuses_its_output():
    # gamma'' is built from the gamma node itself: one gamma node at every order.
    for order in (1, 2, 3, 4):
        stats = sd.derivative(ssp.gamma, order).trace(0.5).stats()
        assert stats["operations"].get("gamma") == 1
    second = sd.derivative(ssp.gamma, 2).trace(0.5).formula()
    expected = sympy.gamma(x) * (sympy.polygamma(0, x) ** 2 + sympy.polygamma(1, x))
    assert second.expand() == expected.expand()


def test_integer_order_bessel_shares_the_general_primitive():
    F = sd.trace(lambda x: ssp.j0(x) + ssp.jv(0, x) + sc.j0(x) + sc.jv(0, x), 0.5)
    assert F.stats()["operations"]["jv"] == 1
    assert F.formula() == 4 * sympy.besselj(0, x)


def test_latex_uses_the_mathematicians_names():
    text = sd.latex(lambda x: ssp.ndtr(x) + ssp.jv(2, x) + ssp.gamma(x) + ssp.ndtri(x), 0.5)
    for piece in (r"\Phi\left(x\right)", r"J_{2}\left(x\right)", r"\Gamma\left(x\right)", r"\Phi^{-1}"):
        assert piece in text


def test_lambertw_derivative_is_finite_at_zero_and_huge_arguments():
    assert float(sd.grad(ssp.lambertw)(0.0)) == 1.0
    assert np.isfinite(sd.derivative(ssp.lambertw, 3)(1e300))


def test_lambertw_next_to_its_branch_point_keeps_every_digit():
    # 1 + W there is the series in sqrt(2(e x + 1)), not 1 + SciPy's W (3 digits at 2e-15
    # from -1/e): the value, 1 + W and W' at 30 digits, to 1e-14.
    below = -0.36787944117144233  # the float nearest -1/e, just below it
    points = [np.nextafter(below, 0.0), -0.36787944117144, -0.3678794, -0.36, -0.3]
    with mpmath.workdps(30):
        for point in points:
            w = mpmath.lambertw(mpmath.mpf(point)).real
            slope = 1 / (mpmath.exp(w) * (1 + w))
            assert abs(ssp.lambertw(point) - w) <= 1e-15 * abs(w)
            assert abs(ssp._lambertw_1p(point) - (1 + w)) <= 1e-14 * abs(1 + w)
            assert abs(sd.grad(ssp.lambertw)(point) - slope) <= 1e-14 * slope
    assert np.isnan(ssp.lambertw(below)) and np.isnan(sd.grad(ssp.lambertw)(below))
    assert ssp.lambertw1p(x).rewrite(sympy.LambertW) == 1 + sympy.LambertW(x)


def test_digamma_differences_do_not_cancel():
    # beta's, betaln's and poch's partials are psi(a + b) - psi(a): a series in b where
    # |b| <= a/10, the plain difference elsewhere (a < 0 too); both against mpmath.
    a = np.array([1e5, 30.0, 0.5, 2.0, -2.5, 1e-3])
    b = np.array([1e-3, -2.0, 1e-6, 5.0, 0.3, 2.0])
    for n in range(3):
        got = ssp._polygamma_difference(n, a, b)
        with mpmath.workdps(40):
            want = [mpmath.polygamma(n, mpmath.mpf(p) + mpmath.mpf(q)) - mpmath.polygamma(n, mpmath.mpf(p))
                    for p, q in zip(a, b)]
        np.testing.assert_allclose(got, np.array(want, dtype=float), rtol=1e-13)
    formula = sd.grad(lambda a: ssp.betaln(a, 2.0)).trace(1.0).formula()
    a = sympy.Symbol("a")
    assert formula.rewrite(sympy.polygamma) == sympy.polygamma(0, a) - sympy.polygamma(0, a + 2.0)


@pytest.mark.parametrize("shape", [1e3, 1e6, 1e8])
def test_gammainc_derivatives_for_large_shapes(shape):
    # (a-1) log x - x - log gamma(a) would subtract numbers of size a log a (1e-9 lost at
    # a = 1e6); for a >= 1000 the log-density is written around x = a instead.
    points = shape + np.array([-3.0, 0.5, 2.0, 5.0]) * np.sqrt(shape)  # off the zeros of P'' and P'''
    with mpmath.workdps(40):
        a = mpmath.mpf(shape)
        density = lambda t: mpmath.exp((a - 1) * mpmath.log(t) - t - mpmath.loggamma(a))  # noqa: E731
        for order in (1, 2, 3):
            values = sd.derivative(lambda x: ssp.gammainc(shape, x), order)(points)
            expected = [float(mpmath.diff(density, mpmath.mpf(p), order - 1)) for p in points]
            np.testing.assert_allclose(values, expected, rtol=1e-11)
            values = sd.derivative(lambda x: ssp.gammaincc(shape, x), order)(points)
            np.testing.assert_allclose(values, -np.array(expected), rtol=1e-11)


def test_erfinv_derivative_near_one_does_not_overflow_early():
    # exp(erfinv(x)**2) is about 1/(1 - x): huge but finite for x = 1 - 1e-15.
    value = sd.grad(ssp.erfinv)(1 - 1e-15)
    assert np.isfinite(value) and value > 1e13


# ---------------------------------------------------------------------------
# Dispatch: by identity, with the real module in errors
# ---------------------------------------------------------------------------


def test_scipy_ufuncs_dispatch_by_identity():
    assert ssp.SCIPY_UFUNCS[sc.gamma] is ssp.gamma
    assert ssp.SCIPY_UFUNCS[sc.jn] is ssp.jv  # jn is jv in SciPy
    assert ssp.SCIPY_UFUNCS[sc.psi] is ssp.digamma
    # A SciPy ufunc sharing a NumPy ufunc's name computes the same thing.
    np.testing.assert_allclose(sd.grad(lambda x: sc.expm1(x) + sc.log1p(x))(0.5), np.exp(0.5) + 1 / 1.5)


def test_scipy_wrappers_around_private_ufuncs_trace():
    # scipy.special.zeta and lambertw are Python functions calling private ufuncs.
    np.testing.assert_allclose(sd.grad(lambda s: sc.zeta(s))(3.0), sd.grad(ssp.zeta)(3.0))
    np.testing.assert_allclose(sd.grad(lambda q: sc.zeta(3.0, q))(2.0), -3 * sc.zeta(4.0, 2.0))
    w = sc.lambertw(2.0).real
    np.testing.assert_allclose(sd.grad(lambda x: sc.lambertw(x))(2.0), w / (2.0 * (1 + w)), rtol=1e-14)


def test_lambertw_other_branch_is_refused():
    with pytest.raises(sd.SymadError, match="branch k=-1"):
        sd.grad(lambda x: sc.lambertw(x, -1))(-0.2)


@pytest.mark.parametrize(
    "call, name",
    [(lambda x: sc.hyp2f1(1.0, 2.0, 3.0, x), "scipy.special.hyp2f1"),
     (lambda x: sc.struve(1.0, x), "scipy.special.struve"),
     (lambda x: np.spacing(x), "numpy.spacing")],
    ids=["hyp2f1", "struve", "numpy-spacing"],
)
def test_untraceable_ufunc_names_its_real_module(call, name):
    with pytest.raises(sd.TracingError) as info:
        sd.grad(call)(0.3)
    message = str(info.value)
    assert f"the ufunc {name}," in message and "@sd.primitive" in message
    assert "numpy.hyp2f1" not in message


def test_numpy_ufuncs_still_route_by_name():
    np.testing.assert_allclose(sd.grad(lambda x: np.sin(x) * np.exp(x))(0.3),
                               np.cos(0.3) * np.exp(0.3) + np.sin(0.3) * np.exp(0.3), rtol=1e-14)


# ---------------------------------------------------------------------------
# Constant parameters: orders and shapes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "f, argument, function",
    [(ssp.jv, "v", "scipy.special.jv(v, x)"), (ssp.kv, "v", "scipy.special.kv(v, x)"),
     (sc.jv, "v", "scipy.special.jv(v, x)"), (sc.yn, "v", "scipy.special.yv(v, x)"),
     (sc.kn, "v", "scipy.special.kv(v, x)"), (sc.iv, "v", "scipy.special.iv(v, x)"),
     (ssp.gammainc, "a", "scipy.special.gammainc(a, x)"),
     (ssp.gammaincc, "a", "scipy.special.gammaincc(a, x)"),
     (ssp.polygamma, "n", "symad.special.polygamma(n, x)")],
    ids=["jv", "kv", "scipy-jv", "scipy-yn", "scipy-kn", "scipy-iv", "gammainc", "gammaincc", "polygamma"],
)
def test_derivative_wrt_a_constant_parameter_is_refused(f, argument, function):
    with pytest.raises(sd.DifferentiationError) as info:
        sd.grad(f, argnums=0)(2.0, 1.5)
    message = str(info.value)
    assert function in message and f"argument {argument}" in message
    assert "sd.stop_gradient" in message and "@sd.primitive" in message
    # The other argument differentiates; a stop_gradient'ed parameter is a constant too.
    assert np.isfinite(sd.grad(f, argnums=1)(2.0, 1.5))
    assert np.isfinite(sd.grad(lambda p, x: f(sd.stop_gradient(p), x) * p, argnums=(0, 1))(2.0, 1.5)[0])
