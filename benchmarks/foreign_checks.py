"""autograd's public API written on symad, for running autograd's own tests through symad.

``benchmarks/foreign_suites.py`` generates a package named ``autograd`` whose modules import
their names from here, so that autograd's test files run unchanged with symad computing every
derivative. Nothing here comes from autograd: the functions below are written from the
semantics its documentation and tests state (a gradient checker that compares forward- and
reverse-mode products with central differences, up to a given order), on ``sd.jvp`` and
``sd.vjp``.

>>> import numpy as np
>>> check_grads(lambda x: np.sum(np.sin(x) * x), modes=["fwd", "rev"], order=2)(np.ones(3))
>>> grad(lambda x, y: x * y, argnum=[0, 1])(2.0, 3.0)
(np.float64(3.0), np.float64(2.0))
"""

from __future__ import annotations

import builtins

import numpy as np

import symad as sd
from symad.tracer import Tracer, is_complex_value

#: autograd's tolerances and finite-difference step, as its test utilities state them.
TOL = 1e-6
RTOL = 1e-6
EPS = 1e-6


class NotApplicable(Exception):
    """A test uses a part of autograd that has no counterpart to map onto symad (its tracer
    internals, its primitive-definition API); the harness counts it as not applicable."""


def not_applicable(what: str, reason: str):
    """A callable (and attribute) that raises NotApplicable when a test reaches ``what``."""
    def refuse(*args, **kwargs):
        raise NotApplicable(f"{what}: {reason}")

    refuse.__name__ = what.rsplit(".", 1)[-1]
    return refuse


# ---------------------------------------------------------------------------
# Values as vectors: pytrees of numbers and arrays (autograd's "vector spaces")
# ---------------------------------------------------------------------------

def _map(function, *trees):
    """``function`` applied leaf by leaf over tuples, lists and dicts of numbers and arrays."""
    first = trees[0]
    if isinstance(first, (builtins.tuple, builtins.list)):
        return type(first)(_map(function, *parts) for parts in zip(*trees))
    if isinstance(first, builtins.dict):
        return {key: _map(function, *(tree[key] for tree in trees)) for key in first}
    return function(*trees)


def _leaves(tree) -> builtins.list:
    if isinstance(tree, (builtins.tuple, builtins.list)):
        return [leaf for part in tree for leaf in _leaves(part)]
    if isinstance(tree, builtins.dict):
        return [leaf for key in tree for leaf in _leaves(tree[key])]
    return [tree]


def _random_like(tree):
    """A random direction in the space of ``tree``: same structure, shapes and kind."""
    def leaf(x):
        value = np.asarray(x)
        direction = np.asarray(np.random.randn(*value.shape))
        if np.iscomplexobj(value):
            direction = direction + 1j * np.random.randn(*value.shape)
        return direction if value.ndim else direction[()]  # a NumPy scalar for a scalar
    return _map(leaf, tree)


def _inner(a, b) -> float:
    """The real inner product of two pytrees (complex leaves as pairs of reals)."""
    return builtins.sum(float(np.real(np.vdot(np.asarray(x).ravel(), np.asarray(y).ravel())))
                        for x, y in zip(_leaves(a), _leaves(b)))


def _axpy(x, v, scale):
    return _map(lambda a, b: a + scale * b, x, v)


def _space(tree) -> builtins.tuple:
    """What autograd compares as a value's vector space: structure, shapes, real or complex."""
    return builtins.tuple((np.shape(leaf), bool(np.iscomplexobj(leaf))) for leaf in _leaves(tree))


def scalar_close(a: float, b: float) -> bool:
    return abs(a - b) < TOL or abs(a - b) / abs(a + b) < RTOL


def check_equivalent(x, y) -> None:
    """``x`` and ``y`` lie in the same space and agree along a random direction."""
    assert _space(x) == _space(y), f"space mismatch:\nx: {_space(x)}\ny: {_space(y)}"
    direction = _random_like(x)
    assert scalar_close(_inner(x, direction), _inner(y, direction)), f"value mismatch:\nx: {x}\ny: {y}"


# ---------------------------------------------------------------------------
# The gradient checker: symad's jvp and vjp against central differences
# ---------------------------------------------------------------------------

def _numerical_jvp(f, x, v):
    """(f(x + v eps/2) - f(x - v eps/2)) / eps."""
    plus, minus = f(_axpy(x, v, EPS / 2)), f(_axpy(x, v, -EPS / 2))
    return _map(lambda p, m: (np.asarray(p) - np.asarray(m)) / EPS, plus, minus)


def _tangent(f, x, v):
    return sd.jvp(f, (x,), (v,))[1]


def _cotangent(f, x, u):
    return sd.vjp(f, x)[1](u)[0]


def check_jvp(f, x) -> None:
    direction = _random_like(x)
    check_equivalent(_tangent(f, x, direction), _numerical_jvp(f, x, direction))


def _covector(tree):
    """The covector of a vector under the real inner product Re(vdot): its conjugate. JAX's
    (and symad's) VJP pulls back cotangents paired without conjugation (``sum(ct * t)``),
    so checking it against ``_inner`` conjugates on the way in and out, as autograd's own
    checker does with its vector spaces' ``covector``."""
    return _map(lambda leaf: np.conj(leaf) if is_complex_value(leaf) else leaf, tree)


def check_vjp(f, x) -> None:
    y = f(x)
    x_direction, y_direction = _random_like(x), _random_like(y)
    pulled = _covector(_cotangent(f, x, _covector(y_direction)))
    assert _space(pulled) == _space(x), f"the VJP's space {_space(pulled)} is not the input's {_space(x)}"
    exact = _inner(x_direction, pulled)
    numeric = _inner(y_direction, _numerical_jvp(f, x, x_direction))
    assert scalar_close(numeric, exact), (
        f"derivative (VJP) check of {getattr(f, '__name__', f)} failed at {x}:\n"
        f"analytic: {exact}\nnumeric:  {numeric}")


def _unary(fun, argnum, args, kwargs):
    """``fun`` as a function of the argument(s) at ``argnum`` (a tuple of them for a tuple)."""
    def unary(x):
        values = builtins.list(args)
        if isinstance(argnum, int):
            values[argnum] = x
        else:
            for position, value in zip(argnum, x):
                values[position] = value
        return fun(*values, **kwargs)
    unary.__name__ = getattr(fun, "__name__", "fun")
    point = args[argnum] if isinstance(argnum, int) else builtins.tuple(args[i] for i in argnum)
    return unary, point


def check_grads(fun, argnum=0, modes=("fwd", "rev"), order=2):
    """autograd's ``check_grads(fun, modes, order)(*args)``, with symad's derivatives.

    Forward mode compares ``sd.jvp`` along a random direction with a central difference;
    reverse mode compares ``<u, vjp(v)>`` with ``<v, central difference along u>``; for
    ``order > 1`` the same checks run on the function ``(x, v) -> jvp`` (and ``vjp``).
    """
    if isinstance(argnum, builtins.list):
        argnum = builtins.tuple(argnum)

    def checked(*args, **kwargs):
        assert all(mode in ("fwd", "rev") for mode in modes)
        f, x = _unary(fun, argnum, args, kwargs)
        if "fwd" in modes:
            check_jvp(f, x)
            if order > 1:
                check_grads(lambda x, v: _tangent(f, x, v), (0, 1), modes, order - 1)(x, _random_like(x))
        if "rev" in modes:
            check_vjp(f, x)
            if order > 1:
                check_grads(lambda x, u: _cotangent(f, x, u), (0, 1), modes, order - 1)(
                    x, _random_like(f(x)))
    return checked


def combo_check(fun, *args, **kwargs):
    """check_grads over every combination of the given argument and keyword values."""
    import itertools

    def over(*values, **keyword_values):
        pairs = [[(key, value) for value in options] for key, options in keyword_values.items()]
        for arguments in itertools.product(*values):
            for keywords in itertools.product(*pairs):
                check_grads(fun, *args, **kwargs)(*arguments, **builtins.dict(keywords))
    return over


# ---------------------------------------------------------------------------
# autograd's transforms on symad's
# ---------------------------------------------------------------------------

def _argnums(argnum):
    return builtins.tuple(argnum) if isinstance(argnum, (builtins.list, builtins.tuple)) else argnum


def grad(fun, argnum=0):
    """autograd's ``grad(fun, argnum)``: ``sd.grad`` (a list of argnums gives a tuple)."""
    return sd.grad(fun, argnums=_argnums(argnum))


def value_and_grad(fun, argnum=0):
    return sd.value_and_grad(fun, argnums=_argnums(argnum))


def grad_and_aux(fun, argnum=0):
    """``fun`` returns ``(value, aux)``; this returns ``(gradient, aux)``."""
    def both(*args, **kwargs):
        gradient, aux = sd.grad(fun, argnums=_argnums(argnum), has_aux=True)(*args, **kwargs)
        return gradient, (aux[0] if isinstance(aux, builtins.tuple) and len(aux) == 1 else aux)
    return both


def elementwise_grad(fun, argnum=0):
    """The VJP with a cotangent of ones: the gradient of the summed output."""
    def pulled(*args, **kwargs):
        f, x = _unary(fun, argnum, args, kwargs)
        y, pullback = sd.vjp(f, x)
        return pullback(_map(np.ones_like, y))[0]
    return pulled


def jacobian(fun, argnum=0):
    return sd.jacobian(fun, argnums=_argnums(argnum))


def hessian(fun, argnum=0):
    return sd.hessian(fun, argnums=_argnums(argnum))


def make_jvp(fun, argnum=0):
    """``make_jvp(fun)(x)(v)`` is ``(fun(x), the JVP along v)``."""
    def at(*args, **kwargs):
        f, x = _unary(fun, argnum, args, kwargs)
        return lambda v: sd.jvp(f, (x,), (v,))
    return at


def make_vjp(fun, argnum=0):
    """``make_vjp(fun)(x)`` is ``(the VJP function, fun(x))``."""
    def at(*args, **kwargs):
        f, x = _unary(fun, argnum, args, kwargs)
        y, pullback = sd.vjp(f, x)
        return (lambda u: pullback(u)[0]), y
    return at


def make_hvp(fun, argnum=0):
    """``make_hvp(fun)(x)`` is ``(v -> H v, gradient at x)``: the VJP of the gradient."""
    return make_vjp(grad(fun, argnum), argnum)


def tensor_jacobian_product(fun, argnum=0):
    """``(*args, v) ->`` the Jacobian of ``fun`` left-multiplied by ``v`` (over v's axes)."""
    def contracted(*args, **kwargs):
        *primals, vector = args
        return np.tensordot(vector, fun(*primals, **kwargs), np.ndim(vector))
    return jacobian(contracted, argnum)


def hessian_tensor_product(fun, argnum=0):
    """``(*args, v) ->`` the Hessian of ``fun`` applied to ``v`` (contracted over v's axes)."""
    def contracted(*args, **kwargs):
        *primals, vector = args
        return np.tensordot(grad(fun, argnum)(*primals, **kwargs), vector, np.ndim(vector))
    return grad(contracted, argnum)


def make_ggnvp(f, g=lambda x: 0.5 * np.sum(x**2, axis=-1), f_argnum=0):
    """``make_ggnvp(f, g)(x)(v)``: the Gauss-Newton product J_f' H_g J_f v at x."""
    def at(*args):
        inner, x = _unary(f, f_argnum, args, {})
        y, pullback = sd.vjp(inner, x)

        def product(v):
            pushed = sd.jvp(inner, (x,), (v,))[1]
            curved = sd.jvp(sd.grad(g), (y,), (pushed,))[1]
            return pullback(curved)[0]
        return product
    return at


def checkpoint(fun):
    return sd.checkpoint(fun)


def isbox(value) -> bool:
    """Whether ``value`` is traced (autograd's boxes are symad's tracers)."""
    return isinstance(value, Tracer)
