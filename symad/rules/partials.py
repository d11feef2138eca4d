"""Symbolic partial derivatives of the built-in primitives: their rows of the partials table.

Every rule is ``rule(out, *operands) -> partial`` (for a variadic primitive,
``rule(out, operands) -> [partial, ...]``), written with traceable
``symad.numpy`` operations so that a derivative is again a graph and higher
orders come by recursion. ``out`` is the node's own result, as autograd's
and JAX's rules receive ``ans``. ``None`` marks a structurally zero partial.

Two properties keep derivatives of every order small and accurate (tested to
order 10, at 1e-20 and 1e20 and in saturated regions, against 50-digit
values in ``tests/test_high_order.py``):

* **no rule rebuilds a power**: d(a/b)/db = -out/b, not -a/b**2, whose
  denominator would square again at every further order (the 10th
  derivative of 1/x held x**1024 and overflowed);
* **no rule cancels, nor do its own derivatives**: arcsin' = 1/sqrt(one_minus_square(x)),
  a primitive valued (1-x)(1+x) (not 1 - x*x, which cancels near |x| = 1) with the
  partial -2x (the product rule on (1-x)(1+x) gives (1-x) - (1+x), which cancels near
  0); hypot's partials are the pair hypot_ratio(a, b) = a/h and hypot_ratio(b, a),
  whose partials are products (a/out differentiates to 1/h - (a/h)**2/h);
  tanh' = sech(x)**2 and sigmoid' = sech(x/2)**2/4, not 1 - out**2 and
  out*(1 - out), which round to 0 once out rounds to 1 (and not cosh(x)**-2,
  whose higher derivatives are 0 * inf past |x| = 355); arcsinh' and the
  partials of arctan2 use hypot and arccosh' a product of two roots, so
  nothing squares past 1e154.

The rows go into :data:`symad.primitives.PARTIALS`, the one partials table (special
functions and SymPy imports give theirs in their stanzas, custom primitives through
``defpartials``).

>>> from symad import primitives as P
>>> P.sin_p in P.PARTIALS, P.PARTIALS[P.less_p]
(True, (None, None))
"""

from __future__ import annotations

import numpy as np
import sympy

from symad import array_primitives as A
from symad import numpy as snp
from symad import primitives as P
from symad.atoms import is_constant, is_zero_constant, same_atom
from symad.tracer import as_atoms, is_complex_value, scalar_atom

__all__ = ["ELEMENTARY_PARTIALS", "NONDIFFERENTIABLE"]

ONE = sympy.Integer(1)
TWO_OVER_SQRT_PI = 2 / sympy.sqrt(sympy.pi)


def _one_minus_square(x):
    """1 - x**2: valued (1 - x)(1 + x), exact near |x| = 1, with the partial -2x, exact near 0."""
    return snp.apply(P.one_minus_square_p, x)


def _hypot_partials(a, b):
    # hypot_ratio(a, b) = a / hypot(a, b): see its stanza in symad/primitives.py.
    return snp.apply(P.hypot_ratio_p, a, b), snp.apply(P.hypot_ratio_p, b, a)


def _hypot_ratio_partials(out, a, b):
    # With c = out = a/h and s = b/h:  dc/da = s (s/h),  dc/db = -s (c/h). Products only,
    # so no order subtracts terms of size 1/h to get one of size b**2/h**3. Grouped so
    # that s = hypot_ratio(b, a), whose partial in a is -c (s/h), shares s/h with dc/da:
    # hypot(x, 2) in Taylor mode needs the series of s/h alone, not also of c/h.
    h = snp.hypot(a, b)
    other = snp.apply(P.hypot_ratio_p, b, a)
    return other * (other / h), -(other * (out / h))


def _base_partial(base, exponent):
    partial = exponent * base ** (exponent - 1)
    exponent_atom = scalar_atom(exponent)  # scalars (the common case) without an object array
    if exponent_atom is not None:
        unguarded = is_constant(exponent_atom) or same_atom(exponent_atom, scalar_atom(base))
    else:
        base_atoms, exponent_atoms = np.broadcast_arrays(as_atoms(base), as_atoms(exponent))
        unguarded = all(is_constant(e) or same_atom(e, b)
                        for b, e in zip(base_atoms.reshape(-1), exponent_atoms.reshape(-1)))
    if unguarded:
        # The builder folded x**0 to 1, so a constant b is never 0 here; x**x needs no
        # guard either (0 * 0**-1 at its only zero exponent, whatever the form).
        return partial
    # A traced exponent p: nested, this gives p (p - 1) ... (p - m + 1) a**(p - m), and for
    # an integer p past m = p the factor (p - p) is exactly 0 while 0**(p - m) is inf at
    # a = 0: 0, not 0 * inf = nan (x**p with p = 2: its third derivative at 0).
    return snp.where(snp.equal(exponent, 0), 0, partial)


def _exponent_partial(out, base, exponent):
    # d/db a**b = log(a) a**b. For the constant base 0 that is log(0) * 0 = nan,
    # but 0**b is constant (0) for b > 0, so the partial is 0, as JAX returns.
    # Elementwise: the reverse sweep may pass whole arrays of operands.
    base_atom = scalar_atom(base)
    if base_atom is not None and not _is_constant_array(base_atom):
        return None if is_zero_constant(base_atom) else snp.log(base) * out
    base_atoms = (np.asarray(dict(base_atom.params)["value"].array) == 0 if base_atom is not None
                  else as_atoms(base))
    zero_base = (base_atoms.reshape(-1) if base_atoms.dtype == bool
                 else np.array([is_zero_constant(atom) for atom in base_atoms.reshape(-1)]))
    if zero_base.all():
        return None
    partial = snp.log(base) * out
    if not zero_base.any():
        return partial
    return snp.where(zero_base.reshape(base_atoms.shape), 0, partial)


def _is_constant_array(atom) -> bool:
    return getattr(atom, "primitive", None) is A.constant_p


def _arctan2_partials(y, x):
    # (x / h) / h with h = hypot(y, x): x**2 + y**2 overflows past 1e154 and
    # underflows below 1e-154, where the hypotenuse does neither.
    h = snp.hypot(y, x)
    return (x / h) / h, (-y / h) / h


def _arcsinh_partial(x):
    # 1/hypot(x, 1) for real x: x**2 would overflow past 1e154. hypot has no complex
    # form; of complex z, 1/sqrt(1 + z**2) with the principal root, whose branch cut (the
    # imaginary axis beyond +-i) is arcsinh's own.
    if is_complex_value(x):
        return 1 / snp.sqrt(1 + x * x)
    return 1 / snp.hypot(x, 1)


def _max_partial(a, b):
    # JAX's convention: at a tie each operand gets half the derivative.
    return snp.where(a > b, 1, snp.where(a < b, 0, sympy.Rational(1, 2)))


def _reduction_partials(extremum, args):
    # At ties the derivative is shared equally among the extremal operands (JAX's convention).
    is_extremal = [snp.where(arg == extremum, 1, 0) for arg in args]
    count = snp.apply(P.add_p, *is_extremal)
    return [indicator / count for indicator in is_extremal]


ELEMENTARY_PARTIALS = {
    # -- arithmetic
    P.add_p: lambda out, args: [ONE] * len(args),
    P.sub_p: (lambda out, a, b: ONE, lambda out, a, b: -ONE),
    P.mul_p: (lambda out, a, b: b, lambda out, a, b: a),
    P.div_p: (lambda out, a, b: 1 / b, lambda out, a, b: -out / b),
    P.neg_p: (lambda out, a: -ONE,),
    # b * a**(b - 1) rather than b * out / a: the quotient is 0/0 at a = 0 (x**2 at 0).
    P.pow_p: (lambda out, a, b: _base_partial(a, b), _exponent_partial),
    # -- roots, exponentials, logarithms
    P.sqrt_p: (lambda out, x: 1 / (2 * out),),
    P.cbrt_p: (lambda out, x: 1 / (3 * out**2),),
    P.exp_p: (lambda out, x: out,),
    P.exp2_p: (lambda out, x: sympy.log(2) * out,),
    # exp(x), not out + 1: the rounding of a small out near 0 is not added back.
    P.expm1_p: (lambda out, x: snp.exp(x),),
    P.log_p: (lambda out, x: 1 / x,),
    P.log2_p: (lambda out, x: 1 / (x * sympy.log(2)),),
    P.log10_p: (lambda out, x: 1 / (x * sympy.log(10)),),
    P.log1p_p: (lambda out, x: 1 / (1 + x),),
    # -- trigonometric and hyperbolic
    P.sin_p: (lambda out, x: snp.cos(x),),
    P.cos_p: (lambda out, x: -snp.sin(x),),
    P.tan_p: (lambda out, x: 1 + out**2,),
    P.arcsin_p: (lambda out, x: 1 / snp.sqrt(_one_minus_square(x)),),
    P.arccos_p: (lambda out, x: -1 / snp.sqrt(_one_minus_square(x)),),
    P.arctan_p: (lambda out, x: 1 / (1 + x**2),),
    P.arctan2_p: (lambda out, y, x: _arctan2_partials(y, x)[0],
                  lambda out, y, x: _arctan2_partials(y, x)[1]),
    P.sinh_p: (lambda out, x: snp.cosh(x),),
    P.cosh_p: (lambda out, x: snp.sinh(x),),
    P.tanh_p: (lambda out, x: snp.apply(P.sech_p, x) ** 2,),
    P.sech_p: (lambda out, x: -out * snp.tanh(x),),
    P.arcsinh_p: (lambda out, x: _arcsinh_partial(x),),
    # sqrt(x - 1) * sqrt(x + 1): the product under one root overflows past 1e154.
    P.arccosh_p: (lambda out, x: 1 / (snp.sqrt(x - 1) * snp.sqrt(x + 1)),),
    P.arctanh_p: (lambda out, x: 1 / _one_minus_square(x),),
    P.one_minus_square_p: (lambda out, x: -2 * x,),
    # -- piecewise and two-argument smooth functions
    # |x|' is sign(x) away from 0; at 0 JAX takes the right derivative (1), which keeps
    # higher derivatives of smooth compositions right: d2/dx2 |x|**2 at 0 is 2, not 0.
    P.abs_p: (lambda out, x: snp.where(x >= 0, 1, -1),),
    P.maximum_p: (lambda out, a, b: _max_partial(a, b), lambda out, a, b: _max_partial(b, a)),
    P.minimum_p: (lambda out, a, b: _max_partial(b, a), lambda out, a, b: _max_partial(a, b)),
    P.reduce_max_p: _reduction_partials,
    P.reduce_min_p: _reduction_partials,
    P.hypot_p: (lambda out, a, b: _hypot_partials(a, b)[0], lambda out, a, b: _hypot_partials(a, b)[1]),
    P.hypot_ratio_p: (lambda out, a, b: _hypot_ratio_partials(out, a, b)[0],
                      lambda out, a, b: _hypot_ratio_partials(out, a, b)[1]),
    P.logaddexp_p: (lambda out, a, b: snp.sigmoid(a - b), lambda out, a, b: snp.sigmoid(b - a)),
    # d/da log2(2**a + 2**b) = 2**a / (2**a + 2**b) = sigmoid((a - b) log 2): never overflows
    P.logaddexp2_p: (lambda out, a, b: snp.sigmoid((a - b) * sympy.log(2)),
                     lambda out, a, b: snp.sigmoid((b - a) * sympy.log(2))),
    # Piecewise linear: a % b = a - floor(a / b) b, and fmod(a, b) = a - trunc(a / b) b;
    # JAX's rules (d/db of 0.7 % 0.3 is -2).
    P.mod_p: (lambda out, a, b: ONE, lambda out, a, b: -snp.floor(a / b)),
    P.fmod_p: (lambda out, a, b: ONE, lambda out, a, b: -snp.trunc(a / b)),
    # The softmax exp(a_i - out): never exp(a_i) / sum, which overflows.
    P.logsumexp_p: lambda out, args: [snp.exp(arg - out) for arg in args],
    # -- special functions
    P.erf_p: (lambda out, x: TWO_OVER_SQRT_PI * snp.exp(-(x**2)),),
    P.erfc_p: (lambda out, x: -TWO_OVER_SQRT_PI * snp.exp(-(x**2)),),
    # sech(x/2)**2 / 4 = sigmoid(x) sigmoid(-x), but its own derivatives come from
    # tanh(x/2), which is small where sigmoid - 1/2 is: out * sigmoid(-x) cancels O(1)
    # terms there (sigmoid^(10)(1e-8) off by 1e-8 relative), and neither form
    # rounds to 0 in the saturated tails.
    P.sigmoid_p: (lambda out, x: snp.apply(P.sech_p, x / 2) ** 2 / 4,),
    P.softplus_p: (lambda out, x: snp.sigmoid(x),),
    # -- selection: the condition has no derivative
    P.select_p: (None, lambda out, c, a, b: snp.where(c, 1, 0), lambda out, c, a, b: snp.where(c, 0, 1)),
}

#: Primitives whose derivative is zero almost everywhere (autograd's
#: ``nograd_functions``, JAX's ``defjvp_zero``): every partial is a structural zero.
NONDIFFERENTIABLE = [
    P.sign_p, P.floor_p, P.ceiling_p, P.stop_gradient_p, P.less_p, P.less_equal_p, P.greater_p, P.greater_equal_p,
    P.equal_p, P.not_equal_p, P.logical_and_p, P.logical_or_p, P.logical_not_p,
]

for _primitive, _rules in ELEMENTARY_PARTIALS.items():
    P.PARTIALS[_primitive] = _rules
    # Every rule above broadcasts (symad.numpy operations, elementwise helpers), so a
    # run of like nodes gets its partials from one call on arrays.
    _primitive.broadcasting_partials = True
for _primitive in NONDIFFERENTIABLE:
    # Piecewise constant or not differentiable: every partial is a structural zero.
    P.PARTIALS[_primitive] = (None,) * _primitive.arity
