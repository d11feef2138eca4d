"""Refusals: the errors for NumPy calls and keywords symad does not trace, with how to
write them in operations it does.

Part of :mod:`symad.numpy`; its dispatch adds the nearest supported names.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as _np

from symad.atom_arrays import traced_function_name
from symad.errors import TracingError

__all__ = ["untraceable", "float_dtype_only"]


#: How to write common NumPy functions symad does not trace with ones it does.
_REWRITES = {
    "ediff1d": "x[1:] - x[:-1]",
    "average": "np.sum(w * x) / np.sum(w)",
    "solve": "Linear algebra beyond @ has no traced form: for a small fixed system write it out, "
             "else wrap the solve with @sd.primitive and give its partials",
    "insert": "snp.concatenate of slices and values",
    "polyval": "Horner's rule in a loop: y = y * x + c",
    "trapezoid": "np.sum((y[1:] + y[:-1]) / 2 * np.diff(t)) with a constant t",
    "trapz": "np.sum((y[1:] + y[:-1]) / 2 * np.diff(t)) with a constant t",
    "ptp": "np.max(x) - np.min(x)",
    "count_nonzero": "np.sum(x != 0)",
    "heaviside": "snp.where(x > 0, 1.0, 0.0)",
    "nansum": "np.sum (on data without NaN)",
    "nanmean": "np.mean (on data without NaN)",
    "nanmax": "np.max (on data without NaN)",
    "nanmin": "np.min (on data without NaN)",
    "float_power": "x ** y",
    "true_divide": "x / y",
    "nanmedian": "np.median (on data without NaN)",
    "all": "a condition for snp.where, e.g. np.min(x) > 0",
    "any": "a condition for snp.where, e.g. np.max(x) > 0",
    "isclose": "a condition for snp.where: np.abs(a - b) <= tol",
}
# numpy.linalg (and scipy.linalg): near names (np.invert for inv) would mislead; the refusal
# says what of linear algebra is traced instead.
_LINALG_TRACED = ("numpy.linalg's solve, inv, det, slogdet, cholesky, eigh, eigvalsh, eig, eigvals, "
                  "svd, svdvals, qr, pinv, lstsq, matrix_power, multi_dot and norm (every ord), and "
                  "scipy.linalg's solve_triangular, cho_factor, cho_solve and expm (as snp.linalg.*)")
for _decomposition in ("matrix_rank", "cond", "tensorinv", "tensorsolve", "lu"):
    _REWRITES[_decomposition] = (
        f"It is not traced yet; symad traces {_LINALG_TRACED}. Write it with those (cond: the "
        "ratio of svd's extreme singular values), or wrap a numeric implementation with "
        "@sd.primitive and give its partials")
_REWRITES.update({
    "allclose": "a condition for snp.where: np.max(np.abs(a - b)) <= tol",
})


def untraceable(what: str, nearest_supported: Callable[[str], list[str]] | None = None) -> TracingError:
    """The TracingError for a call symad does not trace; ``nearest_supported(name)`` gives near
    names symad does trace (the namespace passes it in: it knows every name)."""
    # ``what`` names the call ("numpy.sort", "the ufunc numpy.fmax"); a bare name
    # (not "... with keywords ...") also gets the nearest names symad does trace.
    name = what.rsplit(" ", 1)[-1].split(".")[-1] if " with " not in what else None
    # No near names for linear algebra: nothing symad traces is near a decomposition.
    nearest = (nearest_supported(name) if name and nearest_supported is not None
               and "linalg." not in what else [])
    hint = f" The nearest operations symad traces: {', '.join(nearest)}." if nearest else ""
    if name in _REWRITES:  # a rewrite in traced operations says more than a near name
        rewrite = _REWRITES[name]
        hint = f" {rewrite}." if rewrite[0].isupper() else f" Write it as {rewrite}."
    elif "linalg." in what:
        hint = f" Of linear algebra symad traces {_LINALG_TRACED}."
    return TracingError(
        f"function {traced_function_name()!r} calls {what}, which symad cannot trace.{hint} Use "
        "the operations of symad.numpy, or wrap a numeric implementation with @sd.primitive "
        "and give it partial derivatives with .defpartials."
    )


def float_dtype_only(kwargs: dict, what: str) -> dict:
    """``kwargs`` without a float ``dtype=`` (traced values are real numbers already)."""
    kwargs = dict(kwargs)
    dtype = kwargs.pop("dtype", None)
    if dtype is not None and _np.dtype(dtype).kind != "f":
        raise untraceable(f"{what} with dtype={dtype}")
    return kwargs
