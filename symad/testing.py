"""``check_grads``: compare symad's derivatives with central finite differences.

Arguments may be pytrees (tuples, lists and dicts of arrays), as in JAX's
``check_grads``: tangents and cotangents are random pytrees of the same
structure, and finite differences step every leaf at once.

Forward mode is checked through directional derivatives (``jvp`` along a
random tangent against a central difference along it); reverse mode through
the adjoint identity ``<vjp(u), t> == <u, J t>``. Higher orders recurse on
the derivative functions themselves, which are traced again by symad.
Taylor mode (``"taylor"``, for functions of scalars) is checked order by
order: the k-th directional derivative from ``sd.taylor`` against a central
difference of the (k-1)-th.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from symad.errors import DifferentiationError
from symad.pytree import tree_flatten, tree_unflatten

__all__ = ["check_grads"]


def _flat(value) -> np.ndarray:
    leaves, _ = tree_flatten(value)
    if not leaves:
        return np.zeros(0)
    return np.concatenate([np.ravel(np.asarray(leaf, dtype=np.float64)) for leaf in leaves])


def _combine(args: tuple, tangents: tuple, step: float) -> tuple:
    """``args + step * tangents``, leaf by leaf, in the structure of ``args`` (pytrees)."""
    leaves, treedef = tree_flatten(args)
    return tree_unflatten(treedef, [a + step * t for a, t in zip(leaves, tree_flatten(tangents)[0])])


def _central_difference(f: Callable, args: tuple, tangents: tuple, eps: float) -> np.ndarray:
    plus = f(*_combine(args, tangents, eps))
    minus = f(*_combine(args, tangents, -eps))
    return (_flat(plus) - _flat(minus)) / (2 * eps)


def check_grads(
    f: Callable,
    args: Sequence,
    order: int = 2,
    modes: Sequence[str] = ("fwd", "rev"),
    eps: float = 1e-5,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    seed: int = 0,
) -> None:
    """Raise ``AssertionError`` unless symad's derivatives of ``f`` match finite differences.

    Args:
        f: a function of float scalars or arrays, or of pytrees of them (tuples, lists
            and dicts of arrays, as JAX's ``check_grads`` takes).
        args: the point to check at: one entry per argument of ``f``.
        order: check derivatives up to this order (each order differentiates the previous one).
        modes: ``"fwd"`` (jvp), ``"rev"`` (vjp) and/or ``"taylor"`` (``sd.taylor``
            along a random direction; every argument must be a scalar).
        eps: the finite-difference step.
        rtol, atol: tolerances of the comparison.
        seed: seeds the random tangents and cotangents.

    >>> import numpy as np
    >>> check_grads(np.sin, (0.3,), order=2)
    >>> check_grads(lambda x, y: np.exp(x * y), (0.3, 0.2), order=3, modes=("taylor",))
    >>> def loss(params, x):
    ...     return np.sum(np.tanh(params["w"] * x + params["b"]) ** 2)
    >>> check_grads(loss, ({"w": np.ones(3), "b": np.array(0.5)}, np.arange(3.0)), order=2)
    """
    from symad import api

    for mode in modes:
        if mode not in ("fwd", "rev", "taylor"):
            raise DifferentiationError(
                f"check_grads: unknown mode {mode!r}; use 'fwd', 'rev' and/or 'taylor'")
    rng = np.random.default_rng(seed)
    leaves, treedef = tree_flatten(tuple(args))
    args = tree_unflatten(treedef, [np.asarray(leaf, dtype=np.float64) for leaf in leaves])
    if "taylor" in modes:
        _check_taylor(f, args, order, eps, rtol, atol, rng)
        modes = tuple(mode for mode in modes if mode != "taylor")

    def check(function: Callable, remaining: int, label: str) -> None:
        tangents = tree_unflatten(treedef, [rng.standard_normal(np.shape(leaf)) for leaf in leaves])
        numeric = _central_difference(function, args, tangents, eps)
        if "fwd" in modes:
            _, analytic = api.jvp(function, args, tangents)
            np.testing.assert_allclose(
                _flat(analytic), numeric, rtol=rtol, atol=atol,
                err_msg=f"forward-mode derivative of {label} disagrees with finite differences",
            )
            if remaining > 1:
                check(lambda *xs: api.jvp(function, xs, tangents)[1], remaining - 1, f"jvp({label})")
        if "rev" in modes:
            out, vjp_fn = api.vjp(function, *args)
            out_leaves, out_treedef = tree_flatten(out)
            cotangent_leaves = [rng.standard_normal(np.shape(leaf)) for leaf in out_leaves]
            cotangent = tree_unflatten(out_treedef, cotangent_leaves)
            pulled_back = vjp_fn(cotangent)
            lhs = float(np.dot(_flat(pulled_back), _flat(tangents)))
            rhs = float(np.dot(_flat(cotangent), numeric))
            np.testing.assert_allclose(
                lhs, rhs, rtol=rtol, atol=atol,
                err_msg=f"reverse-mode derivative of {label} disagrees with finite differences",
            )
            if remaining > 1:
                check(lambda *xs: api.vjp(function, *xs)[1](cotangent), remaining - 1, f"vjp({label})")

    check(f, order, getattr(f, "__name__", "f"))


def _check_taylor(f: Callable, args: tuple, order: int, eps: float, rtol: float, atol: float,
                  rng: np.random.Generator) -> None:
    """Each directional derivative of orders 1..order against a central difference of the one below."""
    from symad import api

    if any(not isinstance(a, np.ndarray) or a.shape != () for a in args):
        raise DifferentiationError(
            "check_grads: mode 'taylor' checks functions of scalars (sd.taylor traces every "
            "argument as a scalar); use 'fwd'/'rev' for array and pytree arguments")
    positions = tuple(range(len(args)))
    direction = tuple(float(d) for d in rng.standard_normal(len(args)))
    series = api.taylor(f, order, argnum=positions, derivatives=True, direction=direction)
    tangents = tuple(np.float64(d) for d in direction)
    for k in range(1, order + 1):
        analytic = _flat(series(*args)[k])
        numeric = _central_difference(lambda *xs, k=k: series(*xs)[k - 1], args, tangents, eps)
        np.testing.assert_allclose(
            analytic, numeric, rtol=rtol, atol=atol,
            err_msg=f"Taylor-mode derivative of order {k} of {getattr(f, '__name__', 'f')} "
                    "disagrees with finite differences of the order below",
        )
