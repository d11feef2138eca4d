"""Random loop programs, a checker of the loop primitives against the unrolled loop, a shrinker.

Why this exists: ``sd.fori_loop``/``sd.scan`` hold a traced body and have their own rules
(tangent and transposed bodies, checkpoint schedules, C/numba kernels, complex leaves as
real/imaginary pairs), so every transform through them is a second implementation of what
the plain Python loop gives by unrolling. This module writes random loop programs and
checks each of them both ways.

A :class:`LoopProgram` is data: the loop's kind (``fori`` or ``scan``, forward or
``reverse``), its number of steps, its carry (one leaf, a tuple or a dict of leaves: scalars,
small arrays, arrays of more than 256 elements so that the body-calling C kernel runs,
complex leaves now and then), its scanned arrays (0-d steps, size-1 axes, several of them),
the outer values the body reads, whether the body runs inside an inner ``fori`` loop, the
checkpoint schedule, and the body itself: a :class:`tests.random_programs.Program` in the
array vocabulary of issue 33 (elementwise ops, reductions, matmul/einsum, slices,
concatenate, roll, ``where`` with margins) whose inputs are the carry's leaves, the step's
scanned values and the outer values. Each carry leaf is updated contractively,
``0.6 c + 0.4 tanh(v)`` with ``v`` a value of the body (its mean when its shape does not
broadcast to the leaf's), so that 40 steps stay bounded and smooth.

The program prints as one Python function ``program(fori, scan, a0, a1, ...)``: called with
symad's primitives it is the loop version, called with :func:`tests.test_loop_primitives.python_fori`
/ ``python_scan`` it is the unrolled reference. Before a program is kept, the loop is run
step by step with NumPy and every body step at every iteration is checked by
:func:`tests.random_programs.run` (limits and margins from non-differentiable points).

:func:`check` compares values, the gradient w.r.t. every argument (and against central
differences of the loop version), a jvp along a random direction, the vjp of the final
carry and ``ys``, the Hessian of small programs, ``vmap`` of the gradient over 2-3 points
and the traced gradient evaluated on a batch of points. :func:`shrink` makes a failing
program smaller (fewer steps, fewer body steps, no checkpoints, no nesting, real carries...)
while it fails the same way.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np

from tests import random_programs as rp
from tests.random_programs import Failure, Rejected, Verdict, central_difference

#: Numbers of steps drawn (0, 1, 2 and 3 are where off-by-one errors live).
STEPS = (0, 1, 2, 3, 7, 40)
#: Every checkpoint schedule.
CHECKPOINTS = (None, "sqrt", 2, ("levels", 2), ("binomial", 2), ("binomial", 2, 3))
#: Step shapes of scanned arrays (each array is (n, *step)).
X_SHAPES = ((), (1,), (3,), (2, 1), (1, 2))
#: Shapes of "large" carries: more than 256 elements (the C kernel that calls the body).
LARGE_SHAPES = ((300,), (20, 15), (260, 1))
#: Tolerance of the loop version against the unrolled one.
RTOL = 1e-8


@dataclass(frozen=True)
class LoopProgram:
    """A random loop program (see the module docstring).

    ``carry_shapes``: the carry's leaves; ``carry_kind`` "leaf", "tuple" or "dict";
    ``complex_leaves``: which leaves are complex; ``body``: the body's steps as a
    random_programs.Program whose inputs are the carry's leaves, the step's scanned values
    (scan only) and the values read from outside the loop, ``counts`` of each (the shapes
    are the body's input shapes, so the shrinker's shape changes keep them consistent);
    ``sources``: for each carry leaf, the body value its update reads (modulo the number
    of values); ``ys``: "none", "returned" or "ignored" (scan only).
    """

    kind: str
    n: int
    carry_kind: str
    counts: tuple  # (carry leaves, scanned arrays, outer values): the body's inputs, in order
    complex_leaves: tuple
    body: rp.Program
    sources: tuple
    ys: str = "none"
    reverse: bool = False
    nested: bool = False
    checkpoints: object = None
    seed: int = 0

    @property
    def carry_shapes(self) -> tuple:
        return self.body.input_shapes[:self.counts[0]]

    @property
    def x_shapes(self) -> tuple:
        return self.body.input_shapes[self.counts[0]:self.counts[0] + self.counts[1]]

    @property
    def outer_shapes(self) -> tuple:
        return self.body.input_shapes[self.counts[0] + self.counts[1]:]

    @property
    def arg_shapes(self) -> tuple:
        xs = tuple((self.n, *shape) for shape in self.x_shapes)
        return tuple(self.carry_shapes) + xs + tuple(self.outer_shapes)

    def source(self, output: str = "scalar") -> str:
        return render(self, rp.example_inputs(self.body.input_shapes), output=output)

    def function(self, output: str = "scalar"):
        """``program(fori, scan, *args)`` as a Python function."""
        return rp.compile_source(self.source(output), rp.numpy_namespace())

    def versions(self, output: str = "scalar"):
        """(loop version, unrolled version): functions of the arguments only."""
        import symad as sd
        from tests.test_loop_primitives import python_fori, python_scan

        program = self.function(output)
        loop = functools.partial(program, functools.partial(sd.fori_loop,
                                                            checkpoints=self.checkpoints),
                                 functools.partial(sd.scan, checkpoints=self.checkpoints))
        return loop, functools.partial(program, python_fori, python_scan)

    def inputs(self, offset: int = 0):
        """Arguments at which every body step of every iteration is inside the limits."""
        found = self.inputs_and_value(offset)
        return None if found is None else found[0]

    def inputs_and_value(self, offset: int = 0):
        """:meth:`inputs` and the program's value there (by :func:`simulate`), or None."""
        for attempt in range(10):
            rng = np.random.default_rng([self.seed, offset, attempt, 7])
            args = rp.sample_inputs(self.arg_shapes, rng)
            try:
                return args, simulate(self, args)
            except Rejected:
                continue
        return None


# ---------------------------------------------------------------------------
# Rendering and running with NumPy
# ---------------------------------------------------------------------------


def _names(program: LoopProgram) -> tuple[list[str], list[str], list[str]]:
    leaves = len(program.carry_shapes)
    xs = len(program.x_shapes)
    carry = [f"a{k}" for k in range(leaves)]
    return carry, [f"a{leaves + k}" for k in range(xs)], \
        [f"a{leaves + xs + k}" for k in range(len(program.outer_shapes))]


def _update(program: LoopProgram, leaf: int, values) -> str:
    """The new value of carry leaf ``leaf`` as source, from the body's ``values``."""
    source = program.sources[leaf] % (program.body.arity + len(program.body.steps))
    name = rp.value_name(program.body, source)
    shape = program.carry_shapes[leaf]
    try:
        fits = np.broadcast_shapes(np.shape(values[source]), shape) == tuple(shape)
    except ValueError:
        fits = False
    term = f"np.tanh({name})" if fits else f"np.tanh(np.mean({name}))"
    factor = "(0.6+0.3j)" if program.complex_leaves[leaf] else "0.6"
    if program.kind == "fori" and leaf == 0:
        term += " + 0.05 * np.sin(i)"
    return f"{factor} * c{leaf} + 0.4 * ({term})"


def _carry(program: LoopProgram, names: list[str]) -> str:
    if program.carry_kind == "leaf":
        return names[0]
    if program.carry_kind == "tuple":
        return "(" + ", ".join(names) + ",)"
    return "{" + ", ".join(f"'k{k}': {name}" for k, name in enumerate(names)) + "}"


def _unpack(program: LoopProgram, carry: str) -> list[str]:
    leaves = [f"c{k}" for k in range(len(program.carry_shapes))]
    if program.carry_kind == "leaf":
        return [f"c0 = {carry}"]
    if program.carry_kind == "tuple":
        return [f"{', '.join(leaves)}, = {carry}"]
    return [f"c{k} = {carry}['k{k}']" for k in range(len(leaves))]


def _body_lines(program: LoopProgram, values, x_names: list[str], hook: bool) -> list[str]:
    """Unpack the carry, bind the body's inputs, run its steps, return the new carry."""
    _, _, outer = _names(program)
    lines = _unpack(program, "carry")
    bound = [f"np.real(c{k})" if program.complex_leaves[k] else f"c{k}"
             for k in range(len(program.carry_shapes))] + x_names + outer
    lines += [f"x{k} = {name}" for k, name in enumerate(bound)]
    if hook:  # simulate(): the body's steps checked at this iteration's inputs
        lines.append(f"check_body([{', '.join(f'x{k}' for k in range(len(bound)))}])")
    body = rp.run(program.body, values[:program.body.arity], check=False)
    lines += body.lines
    updates = [_update(program, k, body.values) for k in range(len(program.carry_shapes))]
    lines.append(f"new = {_carry(program, updates)}")
    return lines


def render(program: LoopProgram, values, hook: bool = False, output: str = "scalar") -> str:
    """The program as source; ``values`` are the body's values (for shapes only).
    ``output="arrays"``: it returns the final carry's leaves (real and imaginary parts of a
    complex one) and the ys when returned, for vjps."""
    carry_names, xs_names, _ = _names(program)
    args = ", ".join(_names(program)[0] + xs_names + _names(program)[2])
    init = [f"({name} * (1 + 0.5j))" if program.complex_leaves[k] else name
            for k, name in enumerate(carry_names)]
    out = [f"def program(fori, scan, {args}):", f"    # {list(program.arg_shapes)}",
           f"    init = {_carry(program, init)}"]
    steps = [f"x_{k}" for k in range(len(xs_names))]
    if program.kind == "fori":
        inner = _body_lines(program, values, [], hook)
        header = "    def body(i, carry):"
    else:
        inner = _body_lines(program, values, steps, hook)
        header = "    def body(carry, x):"
        if len(steps) == 1:
            inner.insert(0, "x_0 = x")
        elif steps:
            inner.insert(0, f"{', '.join(steps)}, = x")
    if program.nested:
        # the same body, twice, inside an inner fori loop of the outer body
        nested = ["def inner(j, carry):", *[f"    {line}" for line in inner], "    return new",
                  "new = fori(0, 2, inner, carry)"]
        if program.kind == "fori":
            nested = [line.replace("np.sin(i)", "np.sin(i + j)") for line in nested]
        else:  # the ys read the new carry's leaves
            nested += _unpack(program, "new")
        inner = nested
    y = _y_expression(program)
    inner.append("return new" if program.kind == "fori" else f"return new, {y}")
    out.append(header)
    out += [f"        {line}" for line in inner]
    if program.kind == "fori":
        out.append(f"    final = fori(0, {program.n}, body, init)")
    else:
        xs = "None" if not xs_names else xs_names[0] if len(xs_names) == 1 else \
            "(" + ", ".join(xs_names) + ",)"
        out.append(f"    final, ys = scan(body, init, {xs}, length={program.n}, "
                   f"reverse={program.reverse})")
    out += [f"    {line}" for line in _unpack(program, "final")]
    out.append(f"    return {_result(program) if output == 'scalar' else _arrays(program)}")
    return "\n".join(out) + "\n"


def _y_expression(program: LoopProgram) -> str:
    """What each scan step outputs: a value of the body, or None."""
    if program.kind == "fori" or program.ys == "none":
        return "None"
    if program.nested:  # the body's values live in the inner loop: the new first leaf
        return "np.real(c0)" if program.complex_leaves[0] else "c0"
    sinks = program.body.sinks()
    return rp.value_name(program.body, sinks[-1] if sinks else 0)


def _result(program: LoopProgram) -> str:
    """A real scalar from every leaf of the final carry (and the ys when returned)."""
    terms = []
    for k, shape in enumerate(program.carry_shapes):
        weights = rp.weights_expression(shape, k) if shape else f"{round(math.cos(1 + k), 3)}"
        if program.complex_leaves[k]:
            terms.append(f"np.sum(np.real(c{k}) * {weights}) + np.sum(np.imag(c{k}) ** 2)")
        else:
            terms.append(f"np.sum(c{k} * {weights})")
    if program.kind == "scan" and program.ys == "returned":
        terms.append("np.sum(np.cos(ys))")
    return " + ".join(terms)


def _arrays(program: LoopProgram) -> str:
    parts = []
    for k in range(len(program.carry_shapes)):
        parts += [f"np.real(c{k})", f"np.imag(c{k})"] if program.complex_leaves[k] else [f"c{k}"]
    if program.kind == "scan" and program.ys == "returned":
        parts.append("ys")
    return "(" + ", ".join(parts) + ",)"


def simulate(program: LoopProgram, args) -> float:
    """Run the unrolled loop with NumPy, checking every body step at every iteration with
    :func:`tests.random_programs.run` (raises Rejected); return the program's value."""
    from tests.test_loop_primitives import python_fori, python_scan

    def check_body(inputs):
        rp.run(program.body, [np.asarray(v, dtype=float) for v in inputs], check=True)

    scope = dict(rp.numpy_namespace(), check_body=check_body)
    function = rp.compile_source(render(program, rp.example_inputs(program.body.input_shapes),
                                        hook=True), scope)
    with np.errstate(all="ignore"):
        value = np.asarray(function(python_fori, python_scan, *args))
    if not np.isfinite(value) or abs(float(value)) > 1e4:
        raise Rejected("result too large")
    return float(value)


# ---------------------------------------------------------------------------
# Generating
# ---------------------------------------------------------------------------

_SMALL_SHAPES = ((1,), (2,), (3,), (2, 3), (1, 4), (3, 1), (2, 1, 2))


def _leaf_shape(rng) -> tuple:
    roll = rng.random()
    if roll < 0.35:
        return ()
    if roll < 0.88:
        return _SMALL_SHAPES[int(rng.integers(len(_SMALL_SHAPES)))]
    return LARGE_SHAPES[int(rng.integers(len(LARGE_SHAPES)))]


def _body_steps(rng, shapes: tuple, target: int) -> tuple:
    """Up to ``target`` steps of the array vocabulary on inputs of ``shapes``, each one
    accepted by :func:`tests.random_programs.run` at a random first point."""
    names = list(rp.OPS)
    weights = np.array([rp.OPS[name].weight for name in names])
    weights = weights / weights.sum()
    program = rp.Program(shapes, ())
    args = program.inputs()
    if args is None:
        return ()
    steps: list = []
    for _ in range(20 * target):
        if len(steps) >= target:
            break
        op = rp.OPS[names[int(rng.choice(len(names), p=weights))]]
        params = op.make(rng)
        count = program.arity + len(steps)
        for _attempt in range(8 if op.arity > 1 else 2):
            # mostly the newest value (bodies are chains), sometimes any value
            chance = np.ones(count)
            chance[count - 1] += 3.0
            operands = tuple(int(k) for k in rng.choice(count, size=op.arity,
                                                         p=chance / chance.sum()))
            candidate = replace(program, steps=tuple(steps) + (rp.Step(op.name, operands,
                                                                         params),))
            try:
                rp.run(candidate, args)
            except Rejected:
                continue
            steps.append(candidate.steps[-1])
            break
    return tuple(steps)


def generate(seed: int) -> LoopProgram:
    """A valid random loop program, fixed by ``seed``."""
    rng = np.random.default_rng([30, seed])
    while True:
        kind = "fori" if rng.random() < 0.4 else "scan"
        carry_kind = str(rng.choice(["leaf", "tuple", "dict"], p=[0.5, 0.3, 0.2]))
        leaves = 1 if carry_kind == "leaf" else int(rng.integers(2, 4))
        carry = tuple(_leaf_shape(rng) for _ in range(leaves))
        xs = () if kind == "fori" or rng.random() < 0.25 else \
            tuple(X_SHAPES[int(rng.integers(len(X_SHAPES)))] for _ in range(rng.integers(1, 3)))
        outer = tuple(_SMALL_SHAPES[int(rng.integers(len(_SMALL_SHAPES)))] if rng.random() < 0.6
                      else () for _ in range(int(rng.choice([0, 1, 2], p=[0.4, 0.4, 0.2]))))
        shapes = carry + xs + outer
        steps = _body_steps(rng, shapes, int(rng.integers(0, 6)))
        body = rp.Program(shapes, steps, seed=seed)
        count = body.arity + len(steps)
        sources = tuple(int(rng.integers(count)) if rng.random() < 0.4 else
                        int(rng.choice(body.sinks() or [k])) for k in range(leaves))
        program = LoopProgram(
            kind=kind, n=int(rng.choice(STEPS)), carry_kind=carry_kind,
            counts=(leaves, len(xs), len(outer)),
            complex_leaves=tuple(bool(rng.random() < 0.12) for _ in range(leaves)),
            body=body, sources=sources,
            ys=str(rng.choice(["none", "returned", "ignored"])) if kind == "scan" else "none",
            reverse=bool(kind == "scan" and rng.random() < 0.3),
            nested=bool(rng.random() < 0.15),
            checkpoints=CHECKPOINTS[int(rng.integers(len(CHECKPOINTS)))], seed=seed)
        if program.n == 0 and program.ys == "returned":
            # the unrolled reference has no ys to stack at 0 steps (no shape for them)
            program = replace(program, ys="ignored")
        if program.inputs() is not None:
            return program


# ---------------------------------------------------------------------------
# Checking
# ---------------------------------------------------------------------------


#: The comparisons after value and gradient, in groups (a quick run takes one group per program).
GROUPS = (("jvp", "vjp"), ("hessian", "vjp"), ("batches",))


def check(program: LoopProgram, hessian_size: int = 6, groups=GROUPS) -> Verdict:
    """Check the loop version of ``program`` against its unrolled version (see the module
    docstring): a Verdict as :func:`tests.random_programs.check` gives. Values, gradients
    and central differences always; the comparisons of ``groups`` after them."""
    found = program.inputs_and_value()
    if found is None:
        return Verdict("invalid", message="no inputs inside the limits")
    checker = LoopChecker(program, found[0], hessian_size, {name for g in groups for name in g})
    checker.value = found[1]
    return rp.verdict_of(checker)


def _close(got, want, what: str, rtol: float = RTOL) -> None:
    from symad.pytree import tree_flatten

    scale = 1.0 + max((float(np.max(np.abs(np.asarray(w, dtype=float)), initial=0.0))
                       for w in tree_flatten(want)[0]), default=0.0)
    message = _compare(got, want, rtol * scale, what)
    if message:
        raise Failure(what.split(" ")[0], message)


def _compare(got, want, atol: float, what: str) -> str | None:
    from symad.pytree import tree_flatten

    got, want = tree_flatten(got)[0], tree_flatten(want)[0]
    if len(got) != len(want):
        return f"{what}: {len(got)} results, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return f"{what}[{k}]: shape {g.shape}, expected {w.shape}"
        if not np.allclose(g, w, rtol=RTOL, atol=atol):
            with np.printoptions(precision=6, threshold=20, linewidth=200):
                return (f"{what}[{k}]: got {g!r}, expected {w!r} (largest difference "
                        f"{float(np.max(np.abs(g - w))):.3g})")
    return None


class LoopChecker:
    """The comparisons for one program at one point, in order; ``stage`` names what runs."""

    def __init__(self, program: LoopProgram, args, hessian_size: int, checks: set):
        import symad as sd

        self.checks = checks
        self.sd, self.program, self.args = sd, program, args
        self.hessian_size = hessian_size
        self.loop, self.unrolled = program.versions()
        self.argnums = tuple(range(len(args)))
        self.rng = np.random.default_rng([program.seed, 99])
        self.stage = "trace"

    def run(self) -> None:
        sd, args, argnums = self.sd, self.args, self.argnums
        # The loop traced once (sd.fori_loop called on NumPy arrays traces it too) and
        # evaluated: its value against the NumPy run of the unrolled loop.
        self.stage = "traced value"
        self.traced = sd.trace(self.loop, *args)
        _close(self.traced(*args), self.value, "traced value of the loop version")
        self.stage = "grad"
        gradient = sd.grad(self.loop, argnums=argnums)(*args)
        self.stage = "grad (unrolled)"
        self.want = sd.grad(self.unrolled, argnums=argnums)(*args)
        _close(gradient, self.want, "grad vs the unrolled loop")
        self.stage = "grad/fd"
        self.central_differences(gradient)
        if "jvp" in self.checks:
            self.stage = "jvp"
            direction = self.direction()
            _, tangent = sd.jvp(self.loop, tuple(args), tuple(direction))
            want = sum(float(np.sum(g * d)) for g, d in zip(self.want, direction))
            _close(tangent, want, "jvp vs the unrolled gradient")
        if "vjp" in self.checks:
            self.check_vjp()
        if "hessian" in self.checks and \
                sum(math.prod(s) for s in self.program.arg_shapes) <= self.hessian_size:
            self.stage = "hessian"
            _close(sd.hessian(self.loop, argnums=argnums)(*args),
                   sd.hessian(self.unrolled, argnums=argnums)(*args), "hessian vs the unrolled loop")
        if "batches" in self.checks:
            self.check_batches()

    def direction(self):
        direction = [self.rng.normal(size=np.shape(a)) for a in self.args]
        norm = math.sqrt(sum(float(np.sum(d ** 2)) for d in direction)) or 1.0
        return [d / norm for d in direction]

    def central_differences(self, gradient) -> None:
        """<gradient, u> against central differences of the loop version's value (traced
        once: the loop node evaluated, none of its derivative rules)."""
        direction = self.direction()
        got = sum(float(np.sum(g * d)) for g, d in zip(gradient, direction))
        want, error = central_difference(
            lambda t: float(self.traced(*[a + t * d for a, d in zip(self.args, direction)])))
        norm = math.sqrt(sum(float(np.sum(np.asarray(g) ** 2)) for g in gradient))
        if abs(got - float(want)) > rp.RTOL_FD * (abs(float(want)) + norm) + 1e-8 + error:
            raise Failure("grad/fd", f"gradient along a random direction: got {got:.10g}, "
                          f"central differences {float(want):.10g}")

    def check_vjp(self) -> None:
        sd, args = self.sd, self.args
        self.stage = "vjp"
        loop, unrolled = self.program.versions("arrays")
        out, pullback = sd.vjp(loop, *args)
        cotangent = tuple(self.rng.normal(size=np.shape(o)) for o in out)
        got = pullback(cotangent)
        self.stage = "vjp (unrolled)"
        want_out, want_pullback = sd.vjp(unrolled, *args)
        _close(out, want_out, "vjp value vs the unrolled loop")
        _close(got, want_pullback(cotangent), "vjp vs the unrolled loop")

    def check_batches(self) -> None:
        """vmap of the gradient over 2-3 points, and the gradient traced once then evaluated
        on a batch of the same points."""
        sd, argnums = self.sd, self.argnums
        points = [self.args] + [p for p in (self.program.inputs(1), self.program.inputs(2))[
            :1 + self.program.seed % 2] if p is not None]
        if len(points) < 2:
            return
        stacked = [np.stack(column) for column in zip(*points)]
        self.stage = "grad (unrolled) at other points"
        wants = [self.want] + [sd.grad(self.unrolled, argnums=argnums)(*p) for p in points[1:]]
        want = tuple(np.stack(column) for column in zip(*wants))
        self.stage = "vmap of grad"
        _close(sd.vmap(sd.grad(self.loop, argnums=argnums))(*stacked), want,
               "vmap of grad vs the unrolled loop")
        self.stage = "batch"
        traced = sd.grad(self.loop, argnums=argnums).trace(*self.args)
        _close(traced(*stacked), want, "traced grad on a batch vs the unrolled loop")


# ---------------------------------------------------------------------------
# Shrinking
# ---------------------------------------------------------------------------


def candidates(program: LoopProgram):
    """Simpler programs, biggest simplifications first."""
    for n in STEPS:
        if n < program.n and (n > 0 or program.ys != "returned"):
            yield replace(program, n=n)
    simpler = dict(checkpoints=None, nested=False, reverse=False, ys="none")
    for field, value in simpler.items():
        if getattr(program, field) != value:
            yield replace(program, **{field: value})
    for k, flag in enumerate(program.complex_leaves):
        if flag:
            yield replace(program, complex_leaves=program.complex_leaves[:k] + (False,)
                          + program.complex_leaves[k + 1:])
    if program.carry_kind == "dict":
        yield replace(program, carry_kind="tuple")
    for body in rp.candidates(program.body):
        if body.arity == program.body.arity:
            yield replace(program, body=body)
    for k, source in enumerate(program.sources):
        if source != k:  # the update reads the leaf itself
            yield replace(program, sources=program.sources[:k] + (k,) + program.sources[k + 1:])


def shrink(program: LoopProgram, verdict: Verdict, test=check, budget: int = 300) -> rp.Shrunk:
    """The smallest program found that fails as ``program`` does (same Verdict.kind())."""
    return rp.shrink(program, verdict, test, budget, propose=candidates)


def report(program: LoopProgram, verdict: Verdict) -> str:
    """A failure as text: the program's source (checkpoints noted) and what went wrong."""
    output = "arrays" if verdict.check.startswith("vjp") else "scalar"
    return (f"{verdict.status} ({verdict.check}"
            f"{', ' + verdict.error_type if verdict.error_type else ''}), "
            f"checkpoints={program.checkpoints!r}:\n{program.source(output)}{verdict.message}")


# ---------------------------------------------------------------------------
# A long batch from the command line
# ---------------------------------------------------------------------------


def category(program: LoopProgram) -> str:
    """What a program exercises, for the tally of a long batch."""
    big = any(math.prod(shape) > 256 for shape in program.carry_shapes)
    return (f"{program.kind}{'-reverse' if program.reverse else ''}"
            f"|carry={program.carry_kind}{'+large' if big else ''}"
            f"{'+complex' if any(program.complex_leaves) else ''}"
            f"|checkpoints={program.checkpoints}{'|nested' if program.nested else ''}")


def main(argv=None) -> None:
    """``python -m tests.random_loops START STOP``: check seeds START..STOP-1, one line per
    program, then the tally (agree / wrong / error / refused) overall and by feature."""
    import sys
    from collections import Counter, defaultdict

    start, stop = (int(a) for a in (argv or sys.argv[1:3]))
    overall, by = Counter(), defaultdict(Counter)
    for seed in range(start, stop):
        program = generate(seed)
        verdict = check(program)
        overall[verdict.status] += 1
        for part in category(program).split("|") + [f"n={program.n}"]:
            by[part][verdict.status] += 1
        print(f"SEED {seed} {verdict.status} {verdict.check} {verdict.error_type} | "
              f"{category(program)} n={program.n} | {verdict.message[:200]!r}", flush=True)
    print("TOTAL", dict(overall))
    for part in sorted(by):
        print("BY", part, dict(by[part]))


if __name__ == "__main__":
    main()
