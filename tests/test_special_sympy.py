"""``sd.from_sympy`` with SymPy's special functions.

* the examples of issue 10 (besselj, gamma, LambertW, erfinv, floor);
* every SymPy function that SymPy's SciPy printer maps to a SciPy function is accepted:
  its value matches SymPy's ``evalf`` and its first two derivatives match ``sympy.diff``
  (``SCIPY_PRINTER_FUNCTIONS``, the list docs/special-functions.md gives);
* functions only mpmath evaluates (SymPy's ``evalf``) are accepted too;
* piecewise-constant functions have zero derivatives (frac: one);
* refusals are clear: non-scalar parameters, no numeric implementation, no ``fdiff``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sc
import sympy
from sympy.codegen.scipy_nodes import cosm1, powm1
from sympy.printing.numpy import SciPyPrinter

import symad as sd
from symad.sympy_import import numeric_implementation

x, y, n, a, b = sympy.symbols("x y n a b")
R = sympy.Rational


def test_issue_examples():
    F = sd.from_sympy(sympy.besselj(0, x) * y, [x, y])
    np.testing.assert_allclose(F(1.3, 2.0), sc.j0(1.3) * 2.0, rtol=1e-15)
    gx, gy = sd.grad(F, argnums=(0, 1))(1.3, 2.0)
    np.testing.assert_allclose((gx, gy), (-sc.j1(1.3) * 2.0, sc.j0(1.3)), rtol=1e-14)
    assert sd.grad(F).trace(1.3, 2.0).formula() == -y * sympy.besselj(1, x)
    for expression, expected in [
        (sympy.gamma(x), sc.gamma(0.7)),
        (sympy.LambertW(x), sc.lambertw(0.7).real),
        (sympy.erfinv(x), sc.erfinv(0.7)),
        (sympy.floor(x * 3), 2.0),
    ]:
        np.testing.assert_allclose(sd.from_sympy(expression, [x])(0.7), expected, rtol=1e-15)


def test_special_classes_become_symad_special_primitives():
    F = sd.from_sympy(sympy.gamma(x) + sympy.besselk(2, x) + sympy.erfcinv(x), [x])
    assert set(F.stats()["operations"]) >= {"gamma", "kv", "erfcinv"}
    # SymPy's sinc is unnormalised: sinc(x) is symad's (NumPy's) sinc(x/pi).
    np.testing.assert_allclose(sd.from_sympy(sympy.sinc(x), [x])(0.7), np.sin(0.7) / 0.7, rtol=1e-15)


# ---------------------------------------------------------------------------
# Every function SymPy's SciPy printer maps to SciPy
# ---------------------------------------------------------------------------

#: name -> a call whose last argument is x. Orders and degrees are constants.
SCIPY_PRINTER_FUNCTIONS = {
    "Ci": sympy.Ci(x), "Si": sympy.Si(x), "Ei": sympy.Ei(x), "LambertW": sympy.LambertW(x),
    "RisingFactorial": sympy.RisingFactorial(x, R(5, 2)),
    "airyai": sympy.airyai(x), "airyaiprime": sympy.airyaiprime(x), "airybi": sympy.airybi(x),
    "airybiprime": sympy.airybiprime(x),
    "assoc_laguerre": sympy.assoc_laguerre(n, R(1, 2), x),
    "assoc_legendre": sympy.assoc_legendre(n, 1, x),
    "besseli": sympy.besseli(R(5, 2), x), "besselj": sympy.besselj(R(5, 2), x),
    "besselk": sympy.besselk(R(3, 2), x), "bessely": sympy.bessely(R(3, 2), x),
    "beta": sympy.beta(x, R(5, 2)), "beta (one argument)": sympy.beta(x),
    "betainc": sympy.betainc(2, 3, 0, x),
    "betainc_regularized": sympy.betainc_regularized(2, 3, R(1, 10), x),
    "chebyshevt": sympy.chebyshevt(n, x), "chebyshevu": sympy.chebyshevu(n, x),
    "digamma": sympy.digamma(x), "erf": sympy.erf(x), "erfc": sympy.erfc(x),
    "factorial": sympy.factorial(x), "fresnelc": sympy.fresnelc(x), "fresnels": sympy.fresnels(x),
    "gamma": sympy.gamma(x), "gegenbauer": sympy.gegenbauer(n, R(3, 2), x),
    "harmonic": sympy.harmonic(x), "hermite": sympy.hermite(n, x),
    "jacobi": sympy.jacobi(n, R(1, 2), R(3, 2), x), "laguerre": sympy.laguerre(n, x),
    "legendre": sympy.legendre(n, x), "loggamma": sympy.loggamma(x),
    "lowergamma": sympy.lowergamma(R(5, 2), x), "polygamma": sympy.polygamma(2, x),
    "sinc": sympy.sinc(x), "uppergamma": sympy.uppergamma(R(5, 2), x),
    "cosm1": cosm1(x), "powm1": powm1(x, R(5, 2)),
}
DEGREE = 3  # the value of n: polynomials are imported with a symbolic degree
POINT = 0.7


def test_the_list_is_what_the_scipy_printer_maps():
    printer = SciPyPrinter()
    for name, expression in SCIPY_PRINTER_FUNCTIONS.items():
        assert "scipy." in printer.doprint(expression.subs(n, DEGREE)) or name in {
            "assoc_laguerre", "assoc_legendre", "chebyshevt", "chebyshevu", "gegenbauer",
            "hermite", "jacobi", "laguerre", "legendre", "lowergamma", "uppergamma"}, name
    # Every SciPy entry of the printer's table of known functions is in the list, and so is
    # every function the SciPy printer has a method of its own for, except those below.
    listed = {name.split(" ")[0] for name in SCIPY_PRINTER_FUNCTIONS}
    scipy_known = {k for k, v in printer.known_functions.items() if v.startswith("scipy.")}
    assert scipy_known <= listed
    own = {name[len("_print_"):] for name in vars(SciPyPrinter) if name.startswith("_print_")}
    assert own - listed == set(NOT_SCIPY_FUNCTIONS) | set(REFUSED_SCIPY_PRINTER_FUNCTIONS)


#: Methods of SciPy's printer that do not map a function to SciPy.
NOT_SCIPY_FUNCTIONS = {
    "Pi": "a constant (scipy.constants.pi)", "GoldenRatio": "a constant",
    "ImmutableSparseMatrix": "a matrix (scipy.sparse)", "SparseRepMatrix": "a matrix",
    # bernoulli(n, x) is rewritten with zeta, which the printer cannot print: no SciPy
    # mapping. symad evaluates it (mpmath); SymPy has no fdiff for it.
    "bernoulli": "no SciPy mapping",
}
#: Mapped to SciPy, refused by sd.from_sympy (docs/special-functions.md says why).
REFUSED_SCIPY_PRINTER_FUNCTIONS = {
    "Integral": "scipy.integrate.quad: binds a variable, not a function of scalars",
}


def test_the_refused_scipy_printer_functions_say_why():
    integral = sympy.Integral(sympy.exp(-n * x**2), (x, 0, 1))
    assert "scipy.integrate.quad" in SciPyPrinter().doprint(integral)
    with pytest.raises(sd.TracingError, match="Integral takes non-scalar parameters"):
        sd.from_sympy(integral, [n])


def _sympy_value(expression, order):
    derivative = sympy.diff(expression, x, order) if order else expression
    return float(derivative.subs({n: DEGREE, x: sympy.Float(POINT)}).evalf(30))


@pytest.mark.parametrize("name", list(SCIPY_PRINTER_FUNCTIONS))
def test_scipy_printer_function_is_accepted(name):
    expression = SCIPY_PRINTER_FUNCTIONS[name]
    inputs = [n, x] if expression.has(n) else [x]
    F = sd.from_sympy(expression, inputs)
    args = (float(DEGREE), POINT) if expression.has(n) else (POINT,)
    argnum = len(inputs) - 1
    np.testing.assert_allclose(F(*args), _sympy_value(expression, 0), rtol=1e-13)
    if name == "RisingFactorial":  # sympy.diff cannot differentiate it: compare with gamma's
        expected = sc.poch(POINT, 2.5) * (sc.digamma(POINT + 2.5) - sc.digamma(POINT))
        np.testing.assert_allclose(sd.grad(F)(POINT), expected, rtol=1e-13)
        return
    np.testing.assert_allclose(sd.grad(F, argnum)(*args), _sympy_value(expression, 1), rtol=1e-12)
    second = sd.grad(sd.grad(F, argnum), argnum)(*args)
    np.testing.assert_allclose(second, _sympy_value(expression, 2), rtol=1e-11)


def test_polynomial_degree_is_not_differentiable():
    F = sd.from_sympy(sympy.legendre(n, x), [n, x])
    with pytest.raises(sd.DifferentiationError, match="legendre has no closed-form derivative"):
        sd.grad(F, 0)(3.0, 0.3)


def test_scipy_functions_are_found_by_name_in_the_printer_table():
    assert numeric_implementation(sympy.besselj)[1] == "scipy.special.jv"
    assert numeric_implementation(sympy.Ci)[1] == "scipy.special.sici[1]"
    assert numeric_implementation(sympy.assoc_legendre)[1] == "scipy.special.lpmv"
    assert numeric_implementation(sympy.expint)[1] == "mpmath (SymPy's evalf)"


# ---------------------------------------------------------------------------
# mpmath as the last resort, piecewise constants, refusals
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [sympy.expint(2, x), sympy.Shi(x), sympy.Chi(x), sympy.elliptic_f(x, R(1, 2)), sympy.li(x + 2),
     sympy.yn(1, x), sympy.polylog(2, x)],
    ids=str,
)
def test_functions_only_mpmath_evaluates(expression):
    F = sd.from_sympy(expression, [x])
    values = F(np.array([0.4, 0.6]))
    expected = [float(expression.subs(x, p).evalf(20)) for p in (0.4, 0.6)]
    np.testing.assert_allclose(values, expected, rtol=1e-13)
    np.testing.assert_allclose(sd.grad(F)(0.4), _at(sympy.diff(expression, x), 0.4), rtol=1e-12)


def _at(expression, point):
    return float(expression.subs(x, sympy.Float(point)).evalf(30))


def test_piecewise_constant_functions_have_zero_derivatives():
    F = sd.from_sympy(sympy.floor(x) * y + sympy.ceiling(x) + sympy.Heaviside(x - 1) + sympy.frac(x), [x, y])
    np.testing.assert_allclose(F(2.5, 3.0), 2 * 3.0 + 3 + 1 + 0.5)
    gx, gy = sd.grad(F, argnums=(0, 1))(2.5, 3.0)
    assert (gx, gy) == (1.0, 2.0)  # frac' = 1; floor, ceiling and Heaviside contribute 0
    assert float(sd.from_sympy(sympy.Heaviside(x), [x])(0.0)) == 0.5  # SymPy's H(0)


@pytest.mark.parametrize(
    "expression, message",
    [(sympy.hyper([1], [2], x), "non-scalar parameters"),
     (sympy.DiracDelta(x), "no numeric implementation"),
     (sympy.Function("g")(x), "Supported: .*besselj.*@sd.primitive")],
    ids=["hyper", "DiracDelta", "undefined"],
)
def test_unsupported_functions_are_refused_clearly(expression, message):
    with pytest.raises(sd.TracingError, match=message):
        sd.from_sympy(expression, [x])


def test_a_function_without_fdiff_evaluates_but_does_not_differentiate():
    F = sd.from_sympy(sympy.dirichlet_eta(x), [x])
    np.testing.assert_allclose(F(2.0), float(sympy.dirichlet_eta(2).evalf()), rtol=1e-14)
    with pytest.raises(sd.DifferentiationError, match="dirichlet_eta has no closed-form derivative"):
        sd.grad(F)(2.0)


def test_generic_function_partials_reuse_the_node():
    # Ei' = exp(x)/x; airyai'' = x*airyai(x): the second derivative reuses the airyai node.
    F = sd.from_sympy(sympy.airyai(x), [x])
    second = sd.grad(sd.grad(F)).trace(0.5)
    assert second.formula() == x * sympy.airyai(x)
    assert second.stats()["operations"] == {"sympy.airyai": 1, "multiply": 1}


def test_generic_partials_can_all_be_listed_with_a_constant_operand():
    # A caller (Taylor mode) may ask a variadic rule for every partial at once: the
    # constant degree's partial is a structural zero (None), not SymPy's missing fdiff.
    from symad.graph import GraphBuilder
    from symad.sympy_import import sympy_function_primitive
    from symad.tracer import Tracer

    primitive = sympy_function_primitive(sympy.chebyshevt)
    builder = GraphBuilder("demo")
    builder.add_input(x)
    with builder.active():
        out = builder.record(primitive, (sympy.Integer(3), x))
        operands = [Tracer.of_atom(sympy.Integer(3)), Tracer.of_atom(x)]
        partials = list(primitive.partials(Tracer.of_atom(out), operands))
    assert partials[0] is None
    assert partials[1].atoms[()] is not None


@pytest.mark.parametrize(
    "f",
    [lambda x: sc.gammainc(2.5, x) * sc.ndtr(x), lambda x: sc.log_ndtr(x), lambda x: sc.ellipk(x),
     lambda x: sc.zeta(x + 2.0), lambda x: sc.jv(1.5, x) * sc.logit(x / 4)],
    ids=["gammainc-ndtr", "log_ndtr", "ellipk", "zeta", "jv-logit"],
)
def test_formulas_of_derivatives_import_back(f):
    # A derivative's formula (Piecewise branches, series and continued-fraction primitives
    # included) is a SymPy expression from_sympy takes back, with the same values.
    second = sd.derivative(f, 2).trace(0.5)
    again = sd.from_sympy(second.formula(), [x])
    points = np.array([0.05, 0.5, 0.9])
    np.testing.assert_allclose(again(points), second(points), rtol=1e-12)


def _sympy_classes():
    from symad.special import _MpmathFunction

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    return {c.__name__: c for c in subclasses(_MpmathFunction) if not c.__name__.startswith("_")}


LAMBDIFY_POINTS = {
    "ndtr": (0.3,), "log_ndtr": (0.3,), "ndtri": (0.3,), "logit": (0.3,), "xlogy": (0.3, 0.7),
    "xlog1py": (0.3, 0.7), "zeta_derivative": (1, 2.5, 1.5), "polygamma_difference": (0, 2.0, 0.1),
    "mills_excess": (1, 5.0), "sinpi": (0.3,), "cospi": (0.3,), "lambertw1p": (0.3,),
    "elliptic_k_derivative": (1, 0.05), "elliptic_e_derivative": (2, 0.05),
}


def test_every_symad_sympy_function_is_listed():
    assert set(_sympy_classes()) == set(LAMBDIFY_POINTS)


@pytest.mark.parametrize("name", sorted(LAMBDIFY_POINTS))
def test_symad_sympy_functions_lambdify(name):
    # Formulas symad returns hold these classes; lambdify once raised NameError on them.
    import mpmath

    cls, point = _sympy_classes()[name], LAMBDIFY_POINTS[name]
    symbols = sympy.symbols(f"a0:{len(point)}")
    expression = cls(*symbols)
    exact = expression.subs({s: sympy.Rational(str(p)) for s, p in zip(symbols, point)}).evalf(40)
    assert exact.is_Float
    value = sympy.lambdify(symbols, expression, "numpy")(*point)
    assert float(value) == pytest.approx(float(exact), rel=1e-13)
    # Arrays for the last operand (the first is an integer order for some of these).
    vector = sympy.lambdify(symbols, expression, "numpy")(*point[:-1], np.full(3, point[-1]))
    np.testing.assert_allclose(vector, float(exact), rtol=1e-13)
    with mpmath.workdps(30):
        precise = sympy.lambdify(symbols, expression, "mpmath")(*[mpmath.mpf(str(p)) for p in point])
        assert abs(precise - mpmath.mpf(str(exact))) < mpmath.mpf("1e-25") * max(1, abs(precise))
