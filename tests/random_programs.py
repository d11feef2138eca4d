"""Random whole-array NumPy programs, a checker of their derivatives, and a shrinker (issue 33).

Why this exists: wrong gradients reached users because the suite's random programs never
put a reduction right after a broadcast, nor a size-1 or 0-d operand beside a larger one.
This module writes programs that do, in the vocabulary of traced NumPy, and checks symad
on each against references that share none of its array-level rules:

* the program evaluated by NumPy itself (values);
* the per-element version ``sd.trace(program, *args).expand()`` (values, gradients, vjps,
  Jacobians): one scalar node per element, so none of the array-level rules;
* central differences of the program (gradients, along random directions) and of the
  gradient (Hessian-vector products, Hessians).

:func:`check` runs :class:`Checker`'s comparisons in order and returns a :class:`Verdict`:
agree, a wrong number, a raw exception, or a refusal (a ``symad.SymadError``).

A program is **data**, a :class:`Program` of :class:`Step` s, not a closure, for two reasons:
it prints as readable Python source (:meth:`Program.source`), and it can be made smaller
mechanically. :func:`shrink` drops steps, shrinks input shapes towards size 1 and fewer
dimensions and simplifies constants and options while the program still fails the same
way, so a failure is reported as the smallest program that shows it.

Steps keep their choices as *intents* (an axis as a raw number taken modulo the operand's
number of dimensions, a reshape as "merge two adjacent axes", a constant operand as "the
shape that fits"), turned into literal source only once the operands' shapes are known.
That is what lets a shrunk input shape keep most of a program valid.

Every generated step is checked with NumPy before it is kept: NumPy accepts it, the result
is a non-empty float array of at most :data:`MAX_SIZE` elements with moderate values, and
every non-differentiable point (``abs`` at 0, ``max`` ties, ``clip`` bounds, a ``where``
condition's threshold, a denominator near 0, a norm near 0) is at least :data:`MARGIN` away,
so that central differences and the derivative conventions have one right answer.

Used by ``tests/test_random_array_programs.py`` and ``benchmarks/fuzz_vs_jax.py``.
"""

from __future__ import annotations

import math
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

# ---------------------------------------------------------------------------
# Limits
# ---------------------------------------------------------------------------

#: Largest intermediate array: keeps the per-element reference (``expand()``) cheap.
MAX_SIZE = 400
#: Largest magnitude of any intermediate value: central differences lose digits beyond it.
MAX_MAGNITUDE = 1e3
#: Smallest distance from a non-differentiable point (see the module docstring).
MARGIN = 1e-2
#: Inputs are drawn from +-[LOW, HIGH]: away from 0, so abs, where(x > 0, ...) and
#: divisions by inputs have no kink or pole nearby.
LOW, HIGH = 0.2, 1.2


class Rejected(Exception):
    """A step or program NumPy refuses, or one outside the limits above: not generated."""


# ---------------------------------------------------------------------------
# Programs as data
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One assignment ``v_k = <op>(operands)``.

    ``operands`` index the program's values: inputs first (0 .. inputs - 1), then the
    results of earlier steps. ``params`` are the op's intents (see :data:`OPS`).
    """

    op: str
    operands: tuple[int, ...]
    params: tuple = ()


@dataclass(frozen=True)
class Program:
    """A whole-array program: inputs of fixed shapes, steps, and a scalar at the end.

    The scalar adds up every *sink* (a step's value no later step reads, so no step is
    dead code; an input no step reads is left out, and its gradient must be exact zeros):
    ``final="weighted"`` as ``np.sum(v * w)`` with fixed weights ``w = cos(arange)`` so
    that every element matters with its own factor, ``final="sum"`` as a plain
    ``np.sum(v)`` (a reduction right after whatever the last step broadcast). ``seed``
    fixes the inputs.
    """

    input_shapes: tuple[tuple[int, ...], ...]
    steps: tuple[Step, ...]
    final: str = "weighted"
    seed: int = 0

    @property
    def arity(self) -> int:
        return len(self.input_shapes)

    def sinks(self) -> list[int]:
        """The values no step reads: the program's result adds them up."""
        read = {index for step in self.steps for index in step.operands}
        count = self.arity + len(self.steps)
        sinks = [index for index in range(self.arity, count) if index not in read]
        if not self.steps:
            sinks = list(range(self.arity))
        return sinks

    def source(self, name: str = "program", output: str = "scalar") -> str:
        """The program as Python source (``np`` is NumPy, ``snp`` is ``symad.numpy``).

        ``output``: "scalar" returns the weighted sum; "arrays" the sinks themselves (a
        tuple when several); "flat" the sinks raveled and concatenated into one vector
        (for Jacobians, which want one array out).
        """
        return run(self, example_inputs(self.input_shapes), check=False).source(name, output)

    def function(self, output: str = "scalar") -> Callable:
        """The program as a Python function of NumPy arrays (traceable by symad)."""
        return compile_source(self.source(output=output), numpy_namespace())

    def inputs(self, offset: int = 0) -> list[np.ndarray] | None:
        """Random inputs at which the program is well inside its smooth region, or None.

        ``offset`` picks another point (the reuse check evaluates a traced gradient at a
        second point). Up to 20 draws are tried: a shrunk program may put a kink at the
        first draw's values.
        """
        for attempt in range(20):
            rng = np.random.default_rng([self.seed, offset, attempt])
            args = sample_inputs(self.input_shapes, rng)
            try:
                run(self, args, check=True)
            except Rejected:
                continue
            return args
        return None


def sample_inputs(shapes: Sequence[tuple[int, ...]], rng: np.random.Generator) -> list[np.ndarray]:
    """Values ``+-uniform(LOW, HIGH)``: the gap around 0 keeps inputs off the usual kinks."""
    return [np.asarray(rng.choice([-1.0, 1.0], size=shape) * rng.uniform(LOW, HIGH, size=shape))
            for shape in shapes]


def example_inputs(shapes: Sequence[tuple[int, ...]]) -> list[np.ndarray]:
    """Inputs only for their shapes (rendering a program's source needs nothing more)."""
    return [np.full(shape, 0.5) for shape in shapes]


def numpy_namespace() -> dict:
    """The globals a program's source runs with: NumPy and ``symad.numpy`` as ``snp``."""
    import symad.numpy as snp

    return {"np": np, "snp": snp}


def compile_source(source: str, namespace: dict, name: str = "program") -> Callable:
    """``exec`` a program's source in ``namespace`` and return the function it defines."""
    scope = dict(namespace)
    exec(compile(source, f"<random program {name}>", "exec"), scope)
    return scope[name]


# ---------------------------------------------------------------------------
# Running a program with NumPy: shapes, rendering, validity
# ---------------------------------------------------------------------------


@dataclass
class Run:
    """A program evaluated by NumPy at some inputs: every value and every line of source."""

    program: Program
    values: list[np.ndarray]
    lines: list[str]
    result: float = 0.0

    def source(self, name: str = "program", output: str = "scalar") -> str:
        program = self.program
        parameters = ", ".join(f"x{i}" for i in range(program.arity))
        shapes = ", ".join(f"x{i}: {shape}" for i, shape in enumerate(program.input_shapes))
        body = [f"def {name}({parameters}):", f"    # {shapes}"]
        body += [f"    {line}" for line in self.lines]
        names = [value_name(program, k) for k in program.sinks()]
        if output == "arrays":
            body.append(f"    return {', '.join(names)}")
        elif output == "flat":
            raveled = ", ".join(f"np.ravel({name})" for name in names)
            body.append(f"    return np.concatenate([{raveled}])")
        else:
            body.append(f"    return {final_expression(program, self.values)}")
        return "\n".join(body) + "\n"


def value_name(program: Program, index: int) -> str:
    return f"x{index}" if index < program.arity else f"v{index - program.arity}"


def weights_expression(shape: tuple[int, ...], sink: int) -> str:
    """Fixed weights for one sink: ``cos`` of a sequence, different for every sink."""
    size = math.prod(shape)
    scale = round(1.0 + 0.3 * sink, 1)
    base = f"np.cos({scale} * np.arange(1.0, {size + 1}.0))" if scale != 1.0 else \
        f"np.cos(np.arange(1.0, {size + 1}.0))"
    return base if len(shape) == 1 else f"{base}.reshape({shape})"


def final_expression(program: Program, values: Sequence[np.ndarray]) -> str:
    terms = []
    for count, sink in enumerate(program.sinks()):
        name = value_name(program, sink)
        shape = np.shape(values[sink])
        if program.final == "sum":
            terms.append(f"np.sum({name})")
        elif shape == ():
            terms.append(f"{round(math.cos(1.0 + count), 3)} * {name}")
        else:
            terms.append(f"np.sum({name} * {weights_expression(shape, count)})")
    return " + ".join(terms)


def run(program: Program, args: Sequence[np.ndarray], check: bool = True) -> Run:
    """Evaluate ``program`` step by step with NumPy, rendering each step's source.

    With ``check``, raise :class:`Rejected` for a step NumPy refuses, a value outside the
    limits, or a non-differentiable point within :data:`MARGIN` (see :data:`OPS`).
    """
    values: list[np.ndarray] = [np.asarray(arg, dtype=float) for arg in args]
    lines = []
    namespace = numpy_namespace()
    for position, step in enumerate(program.steps):
        op = OPS[step.op]
        operands = [values[index] for index in step.operands]
        names = [value_name(program, index) for index in step.operands]
        shapes = [operand.shape for operand in operands]
        expression = op.render(step.params, names, shapes)
        if expression is None:
            raise Rejected(f"{step.op} does not apply to shapes {shapes}")
        scope = dict(namespace)
        scope.update({name: operand for name, operand in zip(names, operands)})
        try:
            with warnings.catch_warnings(), np.errstate(all="raise" if check else "ignore"):
                warnings.simplefilter("error" if check else "ignore")
                value = eval(expression, scope)  # noqa: S307 - our own generated source
        except Exception as error:  # NumPy refuses: shapes, axes, indices
            raise Rejected(f"{expression}: {type(error).__name__}: {error}") from None
        value = np.asarray(value)
        if check:
            _check_value(expression, value)
            if op.margin is not None:
                margin = op.margin(step.params, operands, shapes)
                if not margin >= MARGIN:
                    raise Rejected(f"{expression}: {margin:.3g} from a non-differentiable point")
        values.append(value)
        lines.append(f"{value_name(program, program.arity + position)} = {expression}")
    result = 0.0
    if check:
        result = evaluate_final(program, values)
    return Run(program, values, lines, result)


def _check_value(expression: str, value: np.ndarray) -> None:
    if value.dtype != np.float64:
        raise Rejected(f"{expression} is {value.dtype}")
    if value.size == 0 or value.size > MAX_SIZE:
        raise Rejected(f"{expression} has {value.size} elements")
    if not np.all(np.isfinite(value)) or np.max(np.abs(value)) > MAX_MAGNITUDE:
        raise Rejected(f"{expression} is too large")


def evaluate_final(program: Program, values: Sequence[np.ndarray]) -> float:
    scope = numpy_namespace()
    scope.update({value_name(program, index): value for index, value in enumerate(values)})
    return float(eval(final_expression(program, values), scope))  # noqa: S307


# ---------------------------------------------------------------------------
# The vocabulary: one Op per kind of step
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """A kind of step.

    ``make(rng)`` draws the intents (shape-independent); ``render(params, names, shapes)``
    writes the expression for operands of those shapes, or None where the op does not
    apply; ``margin(params, operands, shapes)`` is the distance to the nearest
    non-differentiable point (None: smooth everywhere). ``simpler(params)`` lists simpler
    intents for the shrinker.
    """

    name: str
    arity: int
    weight: float
    render: Callable[[tuple, list[str], list[tuple]], str | None]
    make: Callable[[np.random.Generator], tuple] = lambda rng: ()
    margin: Callable[[tuple, list[np.ndarray], list[tuple]], float] | None = None
    simpler: Callable[[tuple], list[tuple]] = lambda params: []


OPS: dict[str, Op] = {}


def _op(*args, **kwargs) -> None:
    op = Op(*args, **kwargs)
    OPS[op.name] = op


def _number(value: float) -> str:
    """A constant as source, in parentheses when negative (``v * (-0.5)``)."""
    text = repr(float(value))
    return f"({text})" if value < 0 else text


def _constant(rng: np.random.Generator) -> float:
    """A constant away from 0 (a factor of 0 would hide the operand's derivative)."""
    return float(rng.choice([-1.0, 1.0]) * round(rng.uniform(0.1, 2.0), 2))


def _rng(seed: int, *shapes) -> np.random.Generator:
    """Choices that depend on the operands' shapes: deterministic in (seed, shapes)."""
    return np.random.default_rng([seed, *[len(shape) for shape in shapes],
                                  *[size for shape in shapes for size in shape]])


def _axis(raw: int, ndim: int, negative: bool) -> int:
    axis = raw % ndim
    return axis - ndim if negative else axis


def _smallest_distance(a, b) -> float:
    """The smallest |a - b| over broadcast elements, exact ties excluded.

    An exact tie of two random values means the two sides are the same computation (a
    broadcast copy, ``maximum(v, v)``): every tie-breaking convention then gives the same
    total derivative, so it is not a kink.
    """
    difference = np.abs(np.asarray(a) - np.asarray(b))
    difference = difference[difference != 0]
    return float(difference.min()) if difference.size else math.inf


def _reduction_gap(x: np.ndarray, axes: tuple[int, ...] | None, largest: bool) -> float:
    """The gap between the extreme and the next distinct value in each reduced slice."""
    x = np.asarray(x) if largest else -np.asarray(x)
    if x.ndim == 0:
        return math.inf
    axes = tuple(range(x.ndim)) if axes is None else tuple(a % x.ndim for a in axes)
    kept = [a for a in range(x.ndim) if a not in axes]
    rows = np.transpose(x, kept + list(axes)).reshape(-1, math.prod(x.shape[a] for a in axes))
    top = rows.max(axis=1, keepdims=True)
    others = np.where(rows == top, -np.inf, rows).max(axis=1)
    gaps = (top[:, 0] - others)[np.isfinite(others)]
    return float(gaps.min()) if gaps.size else math.inf


# ---- elementwise, one operand ---------------------------------------------------------

_UNARY = {
    "neg": "-{0}",
    "sin": "np.sin({0})",
    "cos": "np.cos({0})",
    "tanh": "np.tanh({0})",
    "arctan": "np.arctan({0})",
    "exp": "np.exp({0})",
    "log1p_square": "np.log(1 + {0} ** 2)",
    "sqrt1p_square": "np.sqrt(1 + {0} ** 2)",
    "square": "{0} ** 2",
    "cube": "{0} ** 3",
    "sigmoid": "snp.sigmoid({0})",
    "softplus": "snp.softplus({0})",
    "expm1": "np.expm1({0})",
    "power_of_positive": "(1 + {0} ** 2) ** 1.5",
}
for _name, _template in _UNARY.items():
    _op(_name, 1, 1.0, lambda params, names, shapes, t=_template: t.format(*names))

_op("abs", 1, 1.5, lambda params, names, shapes: f"np.abs({names[0]})",
    margin=lambda params, operands, shapes: float(np.min(np.abs(operands[0]))))

_CONSTANT_FORMS = ["{c} * {a}", "{a} * {c}", "{a} + {c}", "{c} + {a}", "{a} - {c}", "{c} - {a}",
                   "{a} / {c}", "{c} / {a}",
                   # NumPy scalars and 0-d arrays on the left go through __array_ufunc__
                   "np.float64({c}) * {a}", "np.array({c}) - {a}"]


def _render_constant(params, names, shapes):
    form, c = params
    leading = form.startswith("{c}") or "({c})" in form
    return form.format(a=names[0], c=repr(c) if leading else _number(c))


def _constant_margin(params, operands, shapes):
    if params[0] == "{c} / {a}":  # a pole at 0
        return float(np.min(np.abs(operands[0]))) / 10
    return math.inf


def _simpler_constant(params):
    form, c = params
    options = [(form, simple) for simple in (1.0, 2.0, -1.0) if simple != c]
    return options + ([("{c} * {a}", c)] if form != "{c} * {a}" else [])


_op("constant", 1, 4.0, _render_constant,
    make=lambda rng: (str(rng.choice(_CONSTANT_FORMS)), _constant(rng)),
    margin=_constant_margin, simpler=_simpler_constant)


def _clip_bounds(params):
    low, width = params
    return low, round(low + width, 2)


_op("clip", 1, 1.0,
    lambda params, names, shapes:
        "np.clip({}, {}, {})".format(names[0], *map(repr, _clip_bounds(params))),
    make=lambda rng: (round(float(rng.uniform(-1.0, 0.5)), 2), round(float(rng.uniform(0.3, 1.5)), 2)),
    margin=lambda params, operands, shapes: min(
        float(np.min(np.abs(operands[0] - bound))) for bound in _clip_bounds(params)),
    simpler=lambda params: [(-0.5, 1.0)] if params != (-0.5, 1.0) else [])

for _name in ("maximum", "minimum"):
    _op(f"{_name}_constant", 1, 0.7,
        lambda params, names, shapes, n=_name: f"np.{n}({names[0]}, {params[0]!r})",
        make=lambda rng: (round(float(rng.uniform(-1.0, 1.0)), 2),),
        margin=lambda params, operands, shapes: float(np.min(np.abs(operands[0] - params[0]))),
        simpler=lambda params: [(0.5,)] if params != (0.5,) else [])


# ---- elementwise, two operands (NumPy broadcasting) -------------------------------------

_BINARY = {"add": "{0} + {1}", "subtract": "{0} - {1}", "multiply": "{0} * {1}",
           "divide": "{0} / {1}", "maximum": "np.maximum({0}, {1})",
           "minimum": "np.minimum({0}, {1})", "logaddexp": "np.logaddexp({0}, {1})",
           "arctan2": "np.arctan2({0}, {1})", "hypot": "np.hypot({0}, {1})"}


def _arctan2_margin(params, operands, shapes):
    """arctan2(y, x) jumps across y = 0 where x < 0 and is singular at (0, 0)."""
    y, x = np.broadcast_arrays(*operands)
    distance = np.where(x < 0, np.abs(y), np.hypot(y, x))
    return float(np.min(distance))


for _name, _template in _BINARY.items():
    _margin = None
    if _name == "divide":
        def _margin(params, operands, shapes):
            return float(np.min(np.abs(operands[1]))) / 10
    elif _name in ("maximum", "minimum"):
        def _margin(params, operands, shapes):
            return _smallest_distance(operands[0], operands[1])
    elif _name == "arctan2":
        _margin = _arctan2_margin
    elif _name == "hypot":  # a cone at (0, 0)
        def _margin(params, operands, shapes):
            return float(np.min(np.hypot(*operands)))
    _op(_name, 2, 3.0 if _name in ("add", "subtract", "multiply") else 1.2,
        lambda params, names, shapes, t=_template: t.format(*names), margin=_margin)


def _wider_shape(seed: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts against ``shape``: new leading axes, size-1 axes widened,
    some axes of the constant at size 1."""
    rng = _rng(seed, shape)
    lead = tuple(int(n) for n in rng.integers(1, 4, size=int(rng.integers(0, 3))))
    body = []
    for size in shape:
        roll = rng.random()
        if size == 1 and roll < 0.6:
            body.append(int(rng.integers(2, 5)))
        elif roll < 0.2:
            body.append(1)
        else:
            body.append(size)
    return lead + tuple(body)


def _constant_array(shape: tuple[int, ...], kind: str) -> str:
    size = math.prod(shape)
    if kind == "ones":
        return f"np.ones({shape})"
    base = f"np.linspace(-1.0, 1.5, {size})"
    return base if len(shape) == 1 else f"{base}.reshape({shape})"


def _render_constant_array(params, names, shapes):
    form, seed = params
    wide = _wider_shape(seed, shapes[0])
    if form == "ones_plus":
        return f"{_constant_array(wide, 'ones')} + {names[0]}"
    if form == "minus_ones":
        return f"{names[0]} - {_constant_array(wide, 'ones')}"
    if form == "times_arange":  # an integer array
        size = math.prod(wide)
        arange = f"np.arange(1, {size + 1})"
        arange = arange if len(wide) == 1 else f"{arange}.reshape({wide})"
        return f"{names[0]} * {arange}"
    return f"{names[0]} * {_constant_array(wide, 'linspace')}"


_op("constant_array", 1, 2.0, _render_constant_array,
    make=lambda rng: (str(rng.choice(["ones_plus", "minus_ones", "times_linspace",
                                       "times_arange"])),
                      int(rng.integers(1000))),
    simpler=lambda params: [("ones_plus", params[1])] if params[0] != "ones_plus" else [])


def _where_margin(params, operands, shapes):
    return float(np.min(np.abs(operands[0] - params[0])))


_op("where", 3, 1.2,
    lambda params, names, shapes: f"np.where({names[0]} > {params[0]!r}, {names[1]}, {names[2]})",
    make=lambda rng: (round(float(rng.uniform(-0.5, 0.5)), 2),),
    margin=_where_margin, simpler=lambda params: [(0.0,)] if params != (0.0,) else [])
_op("where_constant", 2, 0.6,
    lambda params, names, shapes:
        f"np.where({names[0]} > {params[0]!r}, {names[1]}, {params[1]!r})",
    make=lambda rng: (round(float(rng.uniform(-0.5, 0.5)), 2), round(float(rng.uniform(-1, 1)), 2)),
    margin=_where_margin, simpler=lambda params: [(0.0, 0.5)] if params != (0.0, 0.5) else [])


# ---- reductions --------------------------------------------------------------------------


def _reduction_axes(params, shape) -> tuple[int, ...] | int | None:
    """``axis=`` for a reduction: None (all), one int, or a tuple, maybe negative."""
    kind, seed, negative = params[:3]
    ndim = len(shape)
    if ndim == 0 or kind == "all":
        return None
    if kind == "int":
        return _axis(seed, ndim, negative)
    rng = _rng(seed, shape)
    count = int(rng.integers(1, ndim + 1))
    axes = sorted(int(a) for a in rng.permutation(ndim)[:count])
    return tuple(a - ndim if negative else a for a in axes)


def _axis_keywords(axis, keepdims: bool) -> str:
    text = "" if axis is None else f", axis={axis}"
    return text + (", keepdims=True" if keepdims else "")


_REDUCTIONS = ("sum", "mean", "max", "min", "prod", "var", "std")


def _render_reduction(params, names, shapes):
    function, kind, seed, negative, keepdims, method = params
    axis = _reduction_axes((kind, seed, negative), shapes[0])
    if function == "prod":  # products of many values underflow: small ones only
        axes = range(len(shapes[0])) if axis is None else np.atleast_1d(axis)
        if math.prod(shapes[0][a] for a in axes) > 8:
            return None
    keywords = _axis_keywords(axis, keepdims)
    if method:
        return f"{names[0]}.{function}({keywords.lstrip(', ')})"
    return f"np.{function}({names[0]}{keywords})"


def _reduction_margin(params, operands, shapes):
    function = params[0]
    if function == "std":  # sqrt of the variance: a kink where the slice is constant
        axis = _reduction_axes(params[1:4], shapes[0])
        return float(np.min(np.std(operands[0], axis=axis)))
    if function not in ("max", "min"):
        return math.inf
    axis = _reduction_axes(params[1:4], shapes[0])
    axes = None if axis is None else tuple(np.atleast_1d(axis))
    return _reduction_gap(operands[0], axes, largest=function == "max")


def _simpler_reduction(params):
    function, kind, seed, negative, keepdims, method = params
    options = []
    if keepdims:
        options.append((function, kind, seed, negative, False, method))
    if method:
        options.append((function, kind, seed, negative, keepdims, False))
    if negative:
        options.append((function, kind, seed, False, keepdims, method))
    if kind == "tuple":
        options.append((function, "int", seed, negative, keepdims, method))
    if kind != "all":
        options.append((function, "all", seed, negative, keepdims, method))
    if function not in ("sum",):
        options.append(("sum", kind, seed, negative, keepdims, method))
    return options


_op("reduce", 1, 5.0, _render_reduction,
    make=lambda rng: (str(rng.choice(_REDUCTIONS, p=[0.3, 0.15, 0.15, 0.15, 0.1, 0.08, 0.07])),
                      str(rng.choice(["all", "int", "tuple"], p=[0.3, 0.45, 0.25])),
                      int(rng.integers(1000)), bool(rng.random() < 0.4),
                      bool(rng.random() < 0.4), bool(rng.random() < 0.25)),
    margin=_reduction_margin, simpler=_simpler_reduction)


def _render_norm(params, names, shapes):
    kind, seed, keepdims = params
    ndim = len(shapes[0])
    if kind == "axis" and ndim >= 1:
        return f"np.linalg.norm({names[0]}{_axis_keywords(_axis(seed, ndim, False), keepdims)})"
    if ndim > 2:  # np.linalg.norm of a 3-d array needs an axis
        return None
    return f"np.linalg.norm({names[0]})"


def _norm_margin(params, operands, shapes):
    kind, seed, keepdims = params
    x = operands[0]
    axis = _axis(seed, x.ndim, False) if kind == "axis" and x.ndim else None
    return float(np.min(np.sqrt(np.sum(x ** 2, axis=axis))))


_op("norm", 1, 1.0, _render_norm,
    make=lambda rng: (str(rng.choice(["all", "axis"])), int(rng.integers(1000)),
                      bool(rng.random() < 0.3)),
    margin=_norm_margin,
    simpler=lambda params: [("all", params[1], False)] if params[0] != "all" else [])


def _render_axis_op(template):
    def render(params, names, shapes):
        seed, negative = params
        ndim = len(shapes[0])
        if ndim == 0:
            return None
        return template.format(names[0], _axis(seed, ndim, negative))
    return render


def _axis_make(rng):
    return int(rng.integers(1000)), bool(rng.random() < 0.4)


def _simpler_axis(params):
    return [(params[0], False)] if params[1] else []


_op("logsumexp", 1, 0.6, _render_axis_op("snp.logsumexp({0}, axis={1})"), make=_axis_make,
    simpler=_simpler_axis)
_op("cumsum", 1, 0.6, _render_axis_op("np.cumsum({0}, axis={1})"), make=_axis_make,
    simpler=_simpler_axis)
_op("diff", 1, 0.5, _render_axis_op("np.diff({0}, axis={1})"), make=_axis_make,
    simpler=_simpler_axis)


def _sort_margin(params, operands, shapes):
    """Sorting permutes: a kink where two distinct values of a slice meet."""
    x = operands[0]
    if x.ndim == 0:
        return math.inf
    ordered = np.sort(x, axis=_axis(params[0], x.ndim, params[1]))
    gaps = np.abs(np.diff(ordered, axis=_axis(params[0], x.ndim, params[1])))
    gaps = gaps[gaps != 0]  # exact ties are copies of one value (see _smallest_distance)
    return float(gaps.min()) if gaps.size else math.inf


# Weight 0: symad refuses np.sort today (a TracingError, though SPEC section 8 says it traces);
# give it a weight once it does.
_op("sort", 1, 0.0, _render_axis_op("np.sort({0}, axis={1})"), make=_axis_make,
    margin=_sort_margin, simpler=_simpler_axis)


def _render_diagonal(params, names, shapes):
    kind, seed = params
    ndim = len(shapes[0])
    if ndim < 2:
        return None
    rng = _rng(seed, shapes[0])
    first, second = (int(k) for k in rng.permutation(ndim)[:2])
    offset = int(rng.integers(-1, 2))
    function = "np.trace" if kind == "trace" else "np.diagonal"
    return f"{function}({names[0]}, {offset}, {first}, {second})"


_op("diagonal", 1, 0.6, _render_diagonal,
    make=lambda rng: (str(rng.choice(["trace", "diagonal"])), int(rng.integers(1000))))


# ---- contractions -------------------------------------------------------------------------

_LETTERS = "ijkpqrs"


def _einsum_single(seed, shape):
    """'piq->i' and friends: sums over some axes, a diagonal when two sizes agree."""
    rng = _rng(seed, shape)
    letters = []
    for size in shape:
        earlier = [letter for letter, s in zip(letters, shape) if s == size]
        if earlier and rng.random() < 0.2:
            letters.append(str(rng.choice(earlier)))
        else:
            letters.append(next(c for c in _LETTERS if c not in letters))
    distinct = sorted(set(letters), key=letters.index)
    kept = [str(c) for c in rng.permutation(distinct)[:int(rng.integers(0, len(distinct) + 1))]]
    return "".join(letters) + "->" + "".join(kept)


def _render_einsum_single(params, names, shapes):
    return f"np.einsum({_einsum_single(params[0], shapes[0])!r}, {names[0]})"


_op("einsum1", 1, 1.5, _render_einsum_single, make=lambda rng: (int(rng.integers(1000)),))


def _einsum_pair(seed, shape_a, shape_b=None):
    """Subscripts for two operands; without ``shape_b``, also the constant's shape."""
    rng = _rng(seed, shape_a, shape_b or ())
    letters_a = [_LETTERS[k] for k in range(len(shape_a))]
    sizes = dict(zip(letters_a, shape_a))
    if shape_b is None:
        count = int(rng.integers(0, 3))
        pool = list(letters_a) + ["r", "s"]
        letters_b = [str(c) for c in rng.permutation(pool)[:count]] if pool else []
        shape_b = tuple(sizes.get(c, int(rng.integers(1, 4))) for c in letters_b)
    else:
        letters_b = []
        for size in shape_b:
            same = [c for c in letters_a if sizes[c] == size and c not in letters_b]
            if same and rng.random() < 0.7:
                letters_b.append(str(rng.choice(same)))
            else:
                letters_b.append(next(c for c in "rstuvw" if c not in letters_b))
    distinct = sorted(set(letters_a) | set(letters_b))
    kept = [str(c) for c in rng.permutation(distinct)[:int(rng.integers(0, len(distinct) + 1))]]
    subscripts = "".join(letters_a) + "," + "".join(letters_b) + "->" + "".join(kept)
    return subscripts, shape_b


def _render_einsum_pair(params, names, shapes):
    subscripts, _ = _einsum_pair(params[0], shapes[0], shapes[1])
    return f"np.einsum({subscripts!r}, {names[0]}, {names[1]})"


def _render_einsum_constant(params, names, shapes):
    subscripts, shape_b = _einsum_pair(params[0], shapes[0])
    return f"np.einsum({subscripts!r}, {names[0]}, {_constant_array(shape_b, 'linspace')})"


_op("einsum2", 2, 1.0, _render_einsum_pair, make=lambda rng: (int(rng.integers(1000)),))
_op("einsum_constant", 1, 1.0, _render_einsum_constant, make=lambda rng: (int(rng.integers(1000)),))


def _render_matmul(params, names, shapes):
    form = params[0]
    if form == "@":
        return f"{names[0]} @ {names[1]}"
    if form == "dot":
        return f"np.dot({names[0]}, {names[1]})"
    if form == "outer":
        return f"np.outer({names[0]}, {names[1]})"
    return f"np.tensordot({names[0]}, {names[1]}, axes={params[1] % 3})"


_op("matmul", 2, 2.5, _render_matmul,
    make=lambda rng: (str(rng.choice(["@", "dot", "outer", "tensordot"])), int(rng.integers(1000))),
    simpler=lambda params: [("@", params[1])] if params[0] != "@" else [])


def _render_matmul_constant(params, names, shapes):
    """``v @ W``, ``W @ v``, ``np.dot(v, W)``, ``np.tensordot(v, W, axes=...)`` with a
    constant ``W`` of the shape that fits."""
    form, seed = params
    shape = shapes[0]
    ndim = len(shape)
    rng = _rng(seed, shape)
    width = int(rng.integers(1, 4))
    if form in ("@", "dot") and ndim >= 1:
        w = (shape[-1],) if rng.random() < 0.3 else (shape[-1], width)
        constant = _constant_array(w, "linspace")
        return f"{names[0]} @ {constant}" if form == "@" else f"np.dot({names[0]}, {constant})"
    if form == "left@" and ndim >= 1:
        inner = shape[-2] if ndim >= 2 else shape[0]
        w = (inner,) if rng.random() < 0.3 else (width, inner)
        return f"{_constant_array(w, 'linspace')} @ {names[0]}"
    if form == "tensordot" and ndim >= 1:
        axis = _axis(seed, ndim, False)
        w = (shape[axis], width)
        return (f"np.tensordot({names[0]}, {_constant_array(w, 'linspace')}, "
                f"axes=([{axis}], [0]))")
    if form == "outer":
        return f"np.outer({names[0]}, {_constant_array((width + 1,), 'linspace')})"
    return None


_op("matmul_constant", 1, 2.5, _render_matmul_constant,
    make=lambda rng: (str(rng.choice(["@", "dot", "left@", "tensordot", "outer"])),
                      int(rng.integers(1000))),
    simpler=lambda params: [("@", params[1])] if params[0] != "@" else [])


# ---- structure ----------------------------------------------------------------------------


def _render_reshape(params, names, shapes):
    kind, seed, method = params
    shape = shapes[0]
    ndim = len(shape)
    rng = _rng(seed, shape)
    if kind == "ravel":
        return f"{names[0]}.ravel()" if method else f"np.reshape({names[0]}, -1)"
    if kind == "scalar":
        if math.prod(shape) != 1:
            return None
        new = ()
    elif kind == "insert1":
        at = int(rng.integers(0, ndim + 1))
        new = shape[:at] + (1,) + shape[at:]
    elif kind == "merge":
        if ndim < 2:
            return None
        at = int(rng.integers(0, ndim - 1))
        new = shape[:at] + (shape[at] * shape[at + 1],) + shape[at + 2:]
    elif kind == "split":
        candidates = [(a, f) for a, n in enumerate(shape) for f in range(2, n) if n % f == 0]
        if not candidates:
            return None
        axis, factor = candidates[int(rng.integers(len(candidates)))]
        new = shape[:axis] + (factor, shape[axis] // factor) + shape[axis + 1:]
    else:  # "minus1": infer the first size
        if ndim < 1:
            return None
        new = (-1, shape[-1])
    return f"{names[0]}.reshape({new})" if method else f"np.reshape({names[0]}, {new})"


_op("reshape", 1, 2.0, _render_reshape,
    make=lambda rng: (str(rng.choice(["ravel", "scalar", "insert1", "merge", "split", "minus1"])),
                      int(rng.integers(1000)), bool(rng.random() < 0.5)),
    simpler=lambda params: [(params[0], params[1], False)] if params[2] else [])


def _render_transpose(params, names, shapes):
    kind, seed = params
    ndim = len(shapes[0])
    if kind == "T":
        return f"{names[0]}.T"
    if kind == "default":
        return f"np.transpose({names[0]})"
    if ndim < 2:
        return None
    rng = _rng(seed, shapes[0])
    if kind in ("swapaxes", "moveaxis"):
        a, b = (int(k) for k in rng.permutation(ndim)[:2])
        return f"np.{kind}({names[0]}, {a}, {b - ndim if seed % 2 else b})"
    return f"np.transpose({names[0]}, {tuple(int(k) for k in rng.permutation(ndim))})"


_op("transpose", 1, 1.5, _render_transpose,
    make=lambda rng: (str(rng.choice(["T", "default", "perm", "swapaxes", "moveaxis"])),
                      int(rng.integers(1000))),
    simpler=lambda params: [("T", params[1])] if params[0] != "T" else [])


def _render_broadcast_to(params, names, shapes):
    shape = shapes[0]
    rng = _rng(params[0], shape)
    lead = tuple(int(n) for n in rng.integers(1, 4, size=int(rng.integers(0, 3))))
    body = tuple(int(rng.integers(2, 5)) if size == 1 and rng.random() < 0.7 else size
                 for size in shape)
    return f"np.broadcast_to({names[0]}, {lead + body})"


_op("broadcast_to", 1, 2.5, _render_broadcast_to, make=lambda rng: (int(rng.integers(1000)),))


def _render_expand_dims(params, names, shapes):
    seed, negative = params
    ndim = len(shapes[0]) + 1
    return f"np.expand_dims({names[0]}, {_axis(seed, ndim, negative)})"


_op("expand_dims", 1, 1.0, _render_expand_dims, make=_axis_make, simpler=_simpler_axis)


def _render_squeeze(params, names, shapes):
    kind, seed = params
    ones = [a for a, size in enumerate(shapes[0]) if size == 1]
    if kind == "all" or not ones:
        return f"np.squeeze({names[0]})"
    return f"np.squeeze({names[0]}, axis={ones[seed % len(ones)]})"


_op("squeeze", 1, 1.0, _render_squeeze,
    make=lambda rng: (str(rng.choice(["all", "axis"])), int(rng.integers(1000))),
    simpler=lambda params: [("all", params[1])] if params[0] != "all" else [])


def _render_concatenate(params, names, shapes):
    seed, negative = params
    ndim = len(shapes[0])
    if ndim == 0:
        return None
    return f"np.concatenate([{', '.join(names)}], axis={_axis(seed, ndim, negative)})"


_op("concatenate", 2, 1.0, _render_concatenate, make=_axis_make, simpler=_simpler_axis)


def _render_concatenate_copies(params, names, shapes):
    count, seed = params
    ndim = len(shapes[0])
    if ndim == 0:
        return None
    axis = "" if seed % 3 == 0 else f", axis={_axis(seed, ndim, False)}"
    return f"np.concatenate([{names[0]}] * {count}{axis})"


_op("concatenate_copies", 1, 0.8, _render_concatenate_copies,
    # sometimes past 64 copies: a sum of more than 64 terms once went wrong
    make=lambda rng: (int(rng.choice([2, 3, 65, 70], p=[0.5, 0.3, 0.1, 0.1])),
                      int(rng.integers(1000))),
    simpler=lambda params: [(2, params[1])] if params[0] != 2 else [])


def _render_stack(params, names, shapes):
    seed, negative = params
    ndim = len(shapes[0]) + 1
    return f"np.stack([{', '.join(names)}], axis={_axis(seed, ndim, negative)})"


_op("stack", 2, 0.8, _render_stack, make=_axis_make, simpler=_simpler_axis)


def _render_slice(params, names, shapes):
    seed, = params
    shape = shapes[0]
    if not shape:
        return None
    rng = _rng(seed, shape)
    items = []
    for size in shape:
        roll = rng.random()
        if roll < 0.35:
            items.append(":")
        elif roll < 0.5:
            items.append(str(int(rng.integers(-size, size))))
        else:
            step = int(rng.choice([1, 2, 3, -1, -2]))
            start = int(rng.integers(-size, size)) if rng.random() < 0.6 else None
            stop = int(rng.integers(-size, size + 1)) if rng.random() < 0.4 else None
            text = ("" if start is None else str(start)) + ":" + ("" if stop is None else str(stop))
            items.append(text + (f":{step}" if step != 1 else ""))
    if rng.random() < 0.15:  # a new axis
        items.insert(int(rng.integers(0, len(items) + 1)), "None")
    while len(items) > 1 and items[-1] == ":":
        items.pop()
    if len(items) > 1 and items[0] == ":" and rng.random() < 0.5:  # the leading axes as ...
        items[0] = "..."
    return f"{names[0]}[{', '.join(items)}]"


_op("slice", 1, 2.5, _render_slice, make=lambda rng: (int(rng.integers(1000)),))


def _index_array(rng, size: int) -> str:
    count = int(rng.integers(1, 5))
    picks = [int(k) for k in rng.integers(-size, size, size=count)]
    return f"np.array({picks})"


def _render_fancy(params, names, shapes):
    kind, seed = params
    shape = shapes[0]
    ndim = len(shape)
    if ndim == 0:
        return None
    rng = _rng(seed, shape)
    if kind == "pair" and ndim >= 2:
        count = int(rng.integers(1, 5))
        rows = [int(k) for k in rng.integers(0, shape[0], size=count)]
        columns = [int(k) for k in rng.integers(0, shape[1], size=count)]
        return f"{names[0]}[np.array({rows}), np.array({columns})]"
    axis = int(rng.integers(ndim))
    return f"{names[0]}[{':, ' * axis}{_index_array(rng, shape[axis])}]"


_op("fancy_index", 1, 1.5, _render_fancy,
    make=lambda rng: (str(rng.choice(["axis", "pair"])), int(rng.integers(1000))),
    simpler=lambda params: [("axis", params[1])] if params[0] != "axis" else [])


def _render_take(params, names, shapes):
    kind, seed = params
    shape = shapes[0]
    rng = _rng(seed, shape)
    if kind == "flat" or not shape:
        return f"np.take({names[0]}, {_index_array(rng, math.prod(shape))})"
    axis = int(rng.integers(len(shape)))
    return f"np.take({names[0]}, {_index_array(rng, shape[axis])}, axis={axis})"


_op("take", 1, 1.0, _render_take,
    make=lambda rng: (str(rng.choice(["flat", "axis"])), int(rng.integers(1000))))


def _render_flip(params, names, shapes):
    kind, seed = params
    ndim = len(shapes[0])
    if kind == "all":
        return f"np.flip({names[0]})"
    if ndim == 0:
        return None
    if kind == "step":
        return f"{names[0]}[::-1]"
    return f"np.flip({names[0]}, axis={_axis(seed, ndim, seed % 2 == 1)})"


_op("flip", 1, 1.0, _render_flip,
    make=lambda rng: (str(rng.choice(["all", "axis", "step"])), int(rng.integers(1000))))


def _render_roll(params, names, shapes):
    kind, seed = params
    ndim = len(shapes[0])
    shift = seed % 7 - 3
    if kind == "flat" or ndim == 0:
        return f"np.roll({names[0]}, {shift})"
    return f"np.roll({names[0]}, {shift}, axis={_axis(seed // 7, ndim, False)})"


_op("roll", 1, 1.0, _render_roll,
    make=lambda rng: (str(rng.choice(["flat", "axis"])), int(rng.integers(1000))))


def _render_tile(params, names, shapes):
    rng = _rng(params[0], shapes[0])
    count = int(rng.integers(1, len(shapes[0]) + 2))
    reps = tuple(int(r) for r in rng.integers(1, 4, size=count))
    return f"np.tile({names[0]}, {reps[0] if count == 1 else reps})"


_op("tile", 1, 1.0, _render_tile, make=lambda rng: (int(rng.integers(1000)),))


def _render_repeat(params, names, shapes):
    kind, seed = params
    repeats = seed % 3 + 2
    ndim = len(shapes[0])
    if kind == "flat" or ndim == 0:
        return f"np.repeat({names[0]}, {repeats})"
    return f"np.repeat({names[0]}, {repeats}, axis={_axis(seed // 3, ndim, False)})"


_op("repeat", 1, 1.0, _render_repeat,
    make=lambda rng: (str(rng.choice(["flat", "axis"])), int(rng.integers(1000))))


def _render_pad(params, names, shapes):
    seed, = params
    ndim = len(shapes[0])
    if ndim == 0:
        return None
    rng = _rng(seed, shapes[0])
    if rng.random() < 0.4:
        return f"np.pad({names[0]}, 1)"
    widths = tuple((int(a), int(b)) for a, b in rng.integers(0, 3, size=(ndim, 2)))
    return f"np.pad({names[0]}, {widths})"


_op("pad", 1, 0.5, _render_pad, make=lambda rng: (int(rng.integers(1000)),))


# ---------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------

_SIZES = [1, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7]


def random_shapes(rng: np.random.Generator) -> tuple[tuple[int, ...], ...]:
    """1-3 input shapes, 0-d to 3-d, sizes 1-7, many size-1 axes.

    Most inputs are derived from one base shape (trailing axes kept, some set to 1,
    sometimes 0-d) so that they broadcast against each other; the rest are independent.
    """
    count = int(rng.choice([1, 2, 3], p=[0.3, 0.4, 0.3]))
    base = tuple(int(rng.choice(_SIZES)) for _ in range(int(rng.choice([0, 1, 2, 3],
                                                                    p=[0.1, 0.25, 0.35, 0.3]))))
    shapes = []
    for _ in range(count):
        roll = rng.random()
        if roll < 0.6:
            drop = int(rng.integers(0, len(base) + 1)) if rng.random() < 0.4 else 0
            shape = tuple(1 if rng.random() < 0.25 else size for size in base[drop:])
        elif roll < 0.7:
            shape = ()
        else:
            shape = tuple(int(rng.choice(_SIZES)) for _ in range(int(rng.integers(0, 4))))
        shapes.append(shape)
    return tuple(shapes)


_OP_NAMES = list(OPS)
_OP_WEIGHTS = np.array([OPS[name].weight for name in _OP_NAMES])
_OP_WEIGHTS = _OP_WEIGHTS / _OP_WEIGHTS.sum()


def _pick_operands(rng: np.random.Generator, arity: int, count: int,
                   used: set[int]) -> tuple[int, ...]:
    """Operands: mostly the newest value (programs are chains) or a value nothing reads
    yet (so inputs and side results get used), sometimes any value."""
    weights = np.ones(count)
    weights[count - 1] += 3.0
    weights[[index for index in range(count) if index not in used]] += 2.0
    weights /= weights.sum()
    return tuple(int(k) for k in rng.choice(count, size=arity, p=weights))


def generate(seed: int, max_steps: int = 8) -> Program:
    """A valid random program (see the module docstring), fixed by ``seed``."""
    rng = np.random.default_rng([33, seed])
    while True:
        shapes = random_shapes(rng)
        program = Program(shapes, (), final="weighted" if rng.random() < 0.7 else "sum", seed=seed)
        args = program.inputs()
        if args is not None:
            break
    steps: list[Step] = []
    target = int(rng.integers(1, max_steps + 1))
    for _ in range(40 * max_steps):
        if len(steps) >= target:
            break
        op = OPS[_OP_NAMES[int(rng.choice(len(_OP_NAMES), p=_OP_WEIGHTS))]]
        params = op.make(rng)
        used = {index for step in steps for index in step.operands}
        # Several tries for ops of several operands: their shapes must fit together.
        for _attempt in range(12 if op.arity > 1 else 2):
            operands = _pick_operands(rng, op.arity, program.arity + len(steps), used)
            candidate = replace(program, steps=tuple(steps) + (Step(op.name, operands, params),))
            try:
                run(candidate, args)
            except Rejected:
                continue
            steps.append(candidate.steps[-1])
            break
    return replace(program, steps=tuple(steps))


# ---------------------------------------------------------------------------
# Checking symad on a program
# ---------------------------------------------------------------------------


@dataclass
class Verdict:
    """What checking one program found.

    ``status``: "agree", "wrong" (a wrong number), "error" (an exception that is not a
    ``SymadError``), "refused" (a ``SymadError``: a clear refusal) or "invalid" (the
    program has no valid inputs; the shrinker's candidates only). ``check`` names the
    comparison or the stage that raised.
    """

    status: str
    check: str = ""
    message: str = ""
    error_type: str = ""

    @property
    def failed(self) -> bool:
        return self.status in ("wrong", "error")

    def kind(self) -> tuple[str, str, str]:
        """What must stay the same while shrinking: the status, check and error type."""
        return self.status, self.check, self.error_type


def _flat(values) -> np.ndarray:
    if isinstance(values, (tuple, list)):
        return np.concatenate([np.ravel(np.asarray(v, dtype=float)) for v in values]) \
            if values else np.zeros(0)
    return np.ravel(np.asarray(values, dtype=float))


def _compare(got, want, rtol: float, atol: float, what: str) -> str | None:
    """None if ``got`` matches ``want`` elementwise, else a message with both."""
    got_parts = got if isinstance(got, (tuple, list)) else (got,)
    want_parts = want if isinstance(want, (tuple, list)) else (want,)
    if len(got_parts) != len(want_parts):
        return f"{what}: {len(got_parts)} results, expected {len(want_parts)}"
    for position, (g, w) in enumerate(zip(got_parts, want_parts)):
        g, w = np.asarray(g, dtype=float), np.asarray(w, dtype=float)
        if g.shape != w.shape:
            return f"{what}[{position}]: shape {g.shape}, expected {w.shape}"
        if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=False):
            error = np.abs(g - w)
            worst = np.unravel_index(int(np.argmax(np.where(np.isnan(error), np.inf, error))),
                                     error.shape) if error.ndim else ()
            return (f"{what}[{position}] (input x{position}): got {_show(g)}, expected {_show(w)}"
                    f" (largest difference {float(np.nanmax(error)) if error.size else 0:.3g}"
                    f" at {worst})")
    return None


def _show(value: np.ndarray) -> str:
    with np.printoptions(precision=6, suppress=True, threshold=30, linewidth=10_000):
        return repr(np.asarray(value)) if np.ndim(value) else f"{float(value):.10g}"


def _stencil(f: Callable[[float], np.ndarray], h: float) -> np.ndarray:
    """Fourth-order central difference of ``t -> f(t)`` at 0: truncation error O(h^4), so a
    step of 1e-4 keeps round-off small and still stays well inside :data:`MARGIN`."""
    return (8 * (f(h) - f(-h)) - (f(2 * h) - f(-2 * h))) / (12 * h)


def central_difference(f: Callable[[float], np.ndarray]) -> tuple[np.ndarray, float]:
    """The derivative of ``t -> f(t)`` at 0 and a bound on its error.

    The stencil at ``H`` and at ``H / 2``: their difference is about 15 times the error of
    the second (truncation falls as h^4), and it also shows round-off. A fast-oscillating
    program (``cos`` of a value in the hundreds) then widens its own tolerance instead of
    failing on the reference's error.
    """
    coarse, fine = _stencil(f, H), _stencil(f, H / 2)
    return fine, float(np.max(np.abs(coarse - fine), initial=0.0))


def _shifted(args, direction, t):
    return [a + t * d for a, d in zip(args, direction)]


def _unit_direction(rng, shapes):
    direction = [rng.normal(size=shape) for shape in shapes]
    norm = math.sqrt(sum(float(np.sum(d ** 2)) for d in direction)) or 1.0
    return [d / norm for d in direction]


def _scale(run_: Run) -> float:
    """Magnitude of the program's intermediates: the round-off in its value is relative
    to it (cancellation), not to the result."""
    return 1.0 + max((float(np.max(np.abs(v))) for v in run_.values), default=0.0)


#: Step of the finite differences.
H = 1e-4
#: Tolerances: symad against its per-element version (same arithmetic up to the order of
#: sums) and against central differences (a 4th-order stencil at ``H``).
RTOL_EXACT, RTOL_FD = 1e-8, 1e-5


@dataclass(frozen=True)
class Options:
    """What :func:`check` compares besides values, gradients and the HVP.

    ``hvp_mode``: "fwd-rev" is ``sd.jvp`` of ``sd.grad``; "rev-fwd" is ``sd.grad`` of the
    directional derivative ``sd.jvp(program, ...)[1]``. ``hessian_size``: when the inputs
    have at most that many elements in all, the full ``sd.hessian`` is checked (column by
    column against central differences of the gradient), and so are the dense and sparse
    Jacobians of the arrays before the final sum if they have at most ``jacobian_size``
    elements. ``numba``: the traced gradient compiled by numba too (a second per program).
    """

    hvp_mode: str = "fwd-rev"
    directions: int = 3
    hessian_size: int = 12
    jacobian_size: int = 64
    numba: bool = False


class Failure(Exception):
    """A comparison that did not hold (raised inside :func:`check`, returned as a Verdict)."""

    def __init__(self, check: str, message: str):
        super().__init__(message)
        self.check = check


def check(program: Program, options: Options = Options()) -> Verdict:
    """Check symad on ``program``; see :class:`Checker` for the comparisons, in order."""

    args = program.inputs()
    if args is None:
        return Verdict("invalid", message="no inputs away from its kinks")
    return verdict_of(Checker(program, args, options))


def verdict_of(checker) -> Verdict:
    """Run ``checker`` (its ``run()`` raises :class:`Failure` on a wrong number; its ``stage``
    says what it was checking) and classify how it ended: agree, wrong, refused or error."""
    import symad as sd

    try:
        checker.run()
    except Failure as failure:
        return Verdict("wrong", failure.check, str(failure))
    except sd.SymadError as error:
        return Verdict("refused", checker.stage, f"{type(error).__name__}: {error}",
                       type(error).__name__)
    except Exception as error:  # noqa: BLE001 - every other exception is a finding
        where = traceback.extract_tb(error.__traceback__)[-1]
        return Verdict("error", checker.stage,
                       f"{type(error).__name__}: {error} (at {where.filename}:{where.lineno})",
                       type(error).__name__)
    return Verdict("agree")


class Checker:
    """The comparisons for one program at one point, in the order :meth:`run` makes them.

    References: NumPy's value; the per-element version ``E = sd.trace(f).expand()`` (its
    values and ``sd.grad(E)``: one scalar node per element, none of the array rules);
    central differences of the program and of the traced gradient. ``stage`` names what
    runs, for a verdict on an exception.
    """

    def __init__(self, program: Program, args: list[np.ndarray], options: Options):
        import symad as sd

        self.sd = sd
        self.program, self.args, self.options = program, args, options
        self.function = program.function()
        reference = run(program, args)
        self.value, self.scale = reference.result, _scale(reference)
        self.argnums = tuple(range(program.arity))
        self.rng = np.random.default_rng([program.seed, 99])
        self.stage = "trace"

    def numpy_value(self, point) -> float:
        return float(self.function(*point))

    def compare(self, check: str, got, want, rtol: float, atol: float, what: str) -> None:
        message = _compare(got, want, rtol, atol, what)
        if message:
            raise Failure(check, message)

    def run(self) -> None:
        sd, args, argnums = self.sd, self.args, self.argnums
        whole = sd.trace(self.function, *args)
        self.stage = "evaluate"
        for backend in ("default", "numpy"):
            evaluator = whole if backend == "default" else whole.compile(backend)
            self.compare("value", evaluator(*args), self.value, RTOL_EXACT, 1e-9 * self.scale,
                         f"value ({backend} backend)")
        self.stage = "expand"
        self.elements = whole.expand()
        self.compare("value/expand", self.elements(*args), self.value, RTOL_EXACT,
                     1e-9 * self.scale, "value of expand()")

        self.stage = "grad"
        gradient = sd.grad(self.function, argnums=argnums)(*args)
        self.stage = "grad of expand()"
        element_gradient = sd.grad(self.elements, argnums=argnums)(*args)
        self.g_scale = 1.0 + float(np.max(np.abs(_flat(element_gradient)), initial=0.0))
        self.compare("grad/expand", gradient, element_gradient, RTOL_EXACT, 1e-9 * self.g_scale,
                     "gradient vs expand()")
        message = _directional_check(self.numpy_value, args, gradient, self.rng,
                                     self.options.directions, self.scale, "gradient")
        if message:
            raise Failure("grad/fd", message)
        # One input by an int argnums: the other inputs' paths are left out of the graph.
        one = self.program.seed % self.program.arity
        self.stage = "grad (one input)"
        self.compare("grad/one input", sd.grad(self.function, argnums=one)(*args),
                     element_gradient[one], RTOL_EXACT, 1e-9 * self.g_scale,
                     f"gradient w.r.t. x{one} alone vs expand()")
        self.check_vjp()

        self.stage = "jvp"
        direction = _unit_direction(self.rng, self.program.input_shapes)
        _, tangent = sd.jvp(self.function, tuple(args), tuple(direction))
        want = sum(float(np.sum(np.asarray(g) * d)) for g, d in zip(element_gradient, direction))
        self.compare("jvp/expand", tangent, want, RTOL_EXACT,
                     1e-9 * self.g_scale, "forward-mode directional derivative vs expand()")

        self.stage = "trace of grad"
        self.traced_gradient = sd.grad(self.function, argnums=argnums).trace(*args)
        self.check_hvp()
        if sum(math.prod(shape) for shape in self.program.input_shapes) \
                <= self.options.hessian_size:
            self.check_hessian()
            self.check_jacobians()
        self.check_reuse()
        if self.options.numba:
            self.stage = "numba"
            compiled = self.traced_gradient.compile("numba")
            self.compare("numba", compiled(*args), self.traced_gradient(*args), RTOL_EXACT,
                         1e-9 * self.g_scale, "traced gradient, numba vs default backend")

    def check_vjp(self) -> None:
        """The arrays before the final sum: their values, and ``sd.vjp`` with a random
        cotangent (not constant along broadcast axes, unlike the weights of the sum)."""
        sd, args = self.sd, self.args
        self.stage = "evaluate arrays"
        arrays = self.program.function(output="arrays")
        want = arrays(*args)
        self.compare("value/arrays", sd.trace(arrays, *args)(*args), want, RTOL_EXACT,
                     1e-9 * self.scale, "the arrays before the final sum")
        self.stage = "vjp"
        out, pullback = sd.vjp(arrays, *args)
        several = isinstance(out, tuple)
        outs = out if several else (out,)
        cotangent = tuple(self.rng.normal(size=np.shape(o)) for o in outs)
        got = pullback(cotangent if several else cotangent[0])
        self.stage = "vjp of expand()"
        _, element_pullback = sd.vjp(sd.trace(arrays, *args).expand(), *args)
        want = element_pullback(cotangent if several else cotangent[0])
        scale = 1.0 + float(np.max(np.abs(_flat(want)), initial=0.0))
        self.compare("vjp/expand", got, want, RTOL_EXACT, 1e-9 * scale,
                     "vjp of the arrays before the final sum vs expand()")

    def gradient_derivative(self, direction) -> tuple[np.ndarray, float]:
        """Central differences of the traced gradient along ``direction`` (flattened), and
        the tolerance of a comparison with them."""
        self.stage = "evaluate traced grad"
        want, error = central_difference(
            lambda t: _flat(self.traced_gradient(*_shifted(self.args, direction, t))))
        tolerance = (RTOL_FD * (float(np.max(np.abs(want), initial=0)) + self.g_scale)
                     + 1e-8 * self.scale + error)
        return want, tolerance

    def check_hvp(self) -> None:
        sd, mode = self.sd, self.options.hvp_mode
        self.stage = f"hvp ({mode})"
        direction = tuple(_unit_direction(self.rng, self.program.input_shapes))
        if mode == "fwd-rev":
            _, hvp = sd.jvp(sd.grad(self.function, argnums=self.argnums), tuple(self.args),
                            direction)
        else:
            def directional(*point):
                return sd.jvp(self.function, point, direction)[1]
            hvp = sd.grad(directional, argnums=self.argnums)(*self.args)
        want, tolerance = self.gradient_derivative(direction)
        shapes = self.program.input_shapes
        self.compare(f"hvp/{mode}", tuple(np.asarray(h) for h in hvp), _split(want, shapes), 0,
                     tolerance, f"HVP ({mode}) vs central differences of the gradient")

    def check_hessian(self) -> None:
        """``sd.hessian`` block by block against central differences of the gradient."""
        shapes = self.program.input_shapes
        self.stage = "hessian"
        blocks = self.sd.hessian(self.function, argnums=self.argnums)(*self.args)
        for j, shape in enumerate(shapes):
            for index in np.ndindex(shape):
                direction = [np.zeros(s) for s in shapes]
                direction[j][index] = 1.0
                want, tolerance = self.gradient_derivative(direction)
                self.stage = "hessian"
                got = tuple(np.asarray(blocks[i][j])[(Ellipsis, *index)] if index else
                            np.asarray(blocks[i][j]) for i in range(len(shapes)))
                self.compare("hessian", got, _split(want, shapes), 0, tolerance,
                             f"Hessian column (x{j}{list(index)}) vs central differences")

    def check_jacobians(self) -> None:
        """Forward, reverse and sparse (coloured) Jacobians of the raveled arrays before the
        final sum, and the sparse Hessian, against the per-element version."""
        sd, args, argnums = self.sd, self.args, self.argnums
        self.stage = "jacobian of expand()"
        flat = self.program.function(output="flat")
        out_size = int(np.size(flat(*args)))
        if out_size > self.options.jacobian_size:
            return
        want = sd.jacrev(sd.trace(flat, *args).expand(), argnums=argnums)(*args)
        scale = 1.0 + float(np.max(np.abs(_flat(want)), initial=0.0))
        for mode, transform in (("jacfwd", sd.jacfwd), ("jacrev", sd.jacrev)):
            self.stage = mode
            self.compare(mode, transform(flat, argnums=argnums)(*args), want, RTOL_EXACT,
                         1e-9 * scale, f"{mode} of the raveled arrays vs expand()")
        for k in argnums:
            self.stage = "jacobian (sparse)"
            sparse = sd.jacobian(flat, argnums=k, sparse=True)(*args).toarray()
            self.compare("jacobian (sparse)", sparse, np.reshape(want[k], (out_size, -1)),
                         RTOL_EXACT, 1e-9 * scale,
                         f"sparse Jacobian w.r.t. x{k} of the raveled arrays vs expand()")
            self.stage = "hessian (sparse)"
            sparse = sd.hessian(self.function, argnums=k, sparse=True)(*args).toarray()
            dense = sd.hessian(self.function, argnums=k)(*args)
            size = int(np.size(args[k]))
            self.compare("hessian (sparse)", sparse, np.reshape(dense, (size, size)), RTOL_EXACT,
                         1e-9 * (1.0 + float(np.max(np.abs(dense), initial=0.0))),
                         f"sparse Hessian w.r.t. x{k} vs the dense one")

    def check_reuse(self) -> None:
        """The gradient traced once, at a second point and on a batch of both points."""
        sd = self.sd
        new_args = self.program.inputs(offset=1)
        if new_args is None:
            return
        self.stage = "reuse"
        got = self.traced_gradient(*new_args)
        self.stage = "grad of expand() at new inputs"
        want = sd.grad(self.elements, argnums=self.argnums)(*new_args)
        scale = 1.0 + float(np.max(np.abs(_flat(want)), initial=0.0))
        self.compare("reuse/expand", got, want, RTOL_EXACT, 1e-9 * scale,
                     "traced gradient at new inputs vs expand()")
        message = _directional_check(self.numpy_value, new_args, got, self.rng, 1,
                                     _scale(run(self.program, new_args)),
                                     "traced gradient at new inputs")
        if message:
            raise Failure("reuse/fd", message)
        self.stage = "batch"
        batch = self.traced_gradient(*[np.stack([a, b]) for a, b in zip(self.args, new_args)])
        first = self.traced_gradient(*self.args)
        self.compare("batch", tuple(np.asarray(b)[0] for b in batch), first, 1e-12, 1e-12 * scale,
                     "traced gradient on a batch of two points, first point")
        self.compare("batch", tuple(np.asarray(b)[1] for b in batch), got, 1e-12, 1e-12 * scale,
                     "traced gradient on a batch of two points, second point")


def _split(flat: np.ndarray, shapes) -> tuple[np.ndarray, ...]:
    parts, start = [], 0
    for shape in shapes:
        size = math.prod(shape)
        parts.append(flat[start:start + size].reshape(shape))
        start += size
    return tuple(parts)


def _directional_check(value, args, gradient, rng, directions, scale, what) -> str | None:
    """Compare ``<gradient, u>`` with central differences along random unit directions.

    A wrong component of the gradient shows along almost every random direction, and each
    direction costs eight evaluations of the program, not two per element.
    """
    gradient = gradient if isinstance(gradient, (tuple, list)) else (gradient,)
    g_norm = math.sqrt(sum(float(np.sum(np.asarray(g, dtype=float) ** 2)) for g in gradient))
    for _ in range(directions):
        direction = _unit_direction(rng, [np.shape(a) for a in args])
        got = sum(float(np.sum(np.asarray(g, dtype=float) * d)) for g, d in zip(gradient, direction))
        want, error = central_difference(lambda t, d=direction: value(_shifted(args, d, t)))
        want = float(want)
        if abs(got - want) > RTOL_FD * (abs(want) + g_norm) + 1e-8 * scale + error:
            return (f"{what} along a random direction: got {got:.10g}, central differences "
                    f"{want:.10g}; gradient {tuple(_show(np.asarray(g)) for g in gradient)}")
    return None


# ---------------------------------------------------------------------------
# Shrinking
# ---------------------------------------------------------------------------


def _drop_step(program: Program, position: int, keep_operand: int) -> Program:
    """``program`` without step ``position``: its readers read its ``keep_operand``-th
    operand instead."""
    arity = program.arity
    removed = arity + position
    replacement = program.steps[position].operands[keep_operand]

    def remap(index):
        if index == removed:
            return replacement
        return index - 1 if index > removed else index

    steps = [replace(step, operands=tuple(remap(i) for i in step.operands))
             for k, step in enumerate(program.steps) if k != position]
    return replace(program, steps=tuple(steps))


def _drop_input(program: Program, position: int) -> Program | None:
    """``program`` without input ``position`` (only when no step reads it)."""
    if any(position in step.operands for step in program.steps) or program.arity == 1:
        return None
    shapes = program.input_shapes[:position] + program.input_shapes[position + 1:]
    steps = [replace(step, operands=tuple(i - 1 if i > position else i for i in step.operands))
             for step in program.steps]
    return replace(program, input_shapes=shapes, steps=tuple(steps))


def _truncate(program: Program, length: int) -> Program:
    """The first ``length`` steps only (their sinks become the result)."""
    return replace(program, steps=program.steps[:length])


def candidates(program: Program):
    """Simpler programs, biggest simplifications first."""
    for length in range(len(program.steps)):
        yield _truncate(program, length)
    for position in reversed(range(len(program.steps))):
        for keep in range(len(program.steps[position].operands)):
            yield _drop_step(program, position, keep)
    for position in range(program.arity):
        dropped = _drop_input(program, position)
        if dropped is not None:
            yield dropped
    for position, shape in enumerate(program.input_shapes):
        options = [shape[:axis] + shape[axis + 1:] for axis in range(len(shape))]
        options += [shape[:axis] + (1,) + shape[axis + 1:] for axis in range(len(shape))
                    if shape[axis] > 1]
        options += [shape[:axis] + (shape[axis] - 1,) + shape[axis + 1:]
                    for axis in range(len(shape)) if shape[axis] > 2]
        for option in options:
            shapes = list(program.input_shapes)
            shapes[position] = option
            yield replace(program, input_shapes=tuple(shapes))
    for position, step in enumerate(program.steps):
        for params in OPS[step.op].simpler(step.params):
            steps = list(program.steps)
            steps[position] = replace(step, params=params)
            yield replace(program, steps=tuple(steps))
    if program.final != "sum":
        yield replace(program, final="sum")
    # Reading an input instead of an intermediate shortens chains further.
    for position, step in enumerate(program.steps):
        for slot, operand in enumerate(step.operands):
            for index in range(program.arity):
                if operand >= program.arity:
                    operands = list(step.operands)
                    operands[slot] = index
                    steps = list(program.steps)
                    steps[position] = replace(step, operands=tuple(operands))
                    yield replace(program, steps=tuple(steps))


@dataclass
class Shrunk:
    """The smallest failing program found, its verdict, and how many candidates were run."""

    program: Program
    verdict: Verdict
    tries: int = 0


def shrink(program: Program, verdict: Verdict, test: Callable[[Program], Verdict] = check,
           budget: int = 400, propose: Callable = None) -> Shrunk:
    """The smallest program found that fails the same way as ``program`` (greedy).

    "The same way" is the same :meth:`Verdict.kind`: status, check and exception type.
    ``budget`` bounds the number of candidates checked; ``propose(program)`` yields the
    smaller candidates (:func:`candidates`; the loop programs' own in tests/random_loops.py).
    """
    propose = propose or candidates
    best, best_verdict, tries = program, verdict, 0
    improved = True
    while improved and tries < budget:
        improved = False
        for candidate in propose(best):
            if tries >= budget:
                break
            if candidate.inputs() is None:  # NumPy refuses it, or no smooth point: not tried
                continue
            tries += 1
            outcome = test(candidate)
            if outcome.kind() == verdict.kind():
                best, best_verdict, improved = candidate, outcome, True
                break
    return Shrunk(best, best_verdict, tries)


def report(program: Program, verdict: Verdict) -> str:
    """A failure as text: the program's source, its input shapes and what went wrong.

    Failures of the checks on the arrays before the final sum (:meth:`Checker.check_vjp`,
    :meth:`Checker.check_jacobians`) show that version of the program.
    """
    output = "scalar"
    if verdict.check in ("evaluate arrays", "value/arrays", "vjp", "vjp of expand()",
                         "vjp/expand"):
        output = "arrays"
    elif verdict.check.startswith("jac"):
        output = "flat"
    return (f"{verdict.status} ({verdict.check}"
            f"{', ' + verdict.error_type if verdict.error_type else ''}) "
            f"with inputs of shapes {list(program.input_shapes)}:\n"
            f"{program.source(output=output)}{verdict.message}")
