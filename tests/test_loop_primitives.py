"""sd.fori_loop, sd.scan, sd.while_loop, sd.checkpoint (issue 30): loops that stay loops.

Every program is written once against a ``fori``/``scan`` pair, and run both with the
loop primitives and with plain Python loops (which unroll into the graph, as symad
always did): values and every transform must agree, and gradients are checked against
central differences. Steps 0, 1, 2 and 10^4; scalar, array (0-d, size-1 axes) and
pytree carries; scanned pytrees of several arrays; nested loops; checkpointed and not;
the compiled (numba) and the NumPy step-by-step evaluation.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import symad as sd
from symad.compile.registry import numba_available
from symad.compile.scalar.tape_c import c_compiler
from symad.errors import DifferentiationError, TracingError


def python_fori(lower, upper, body, init, checkpoints=None):
    value = init
    for i in range(lower, upper):
        value = body(float(i), value)
    return value


def python_scan(f, init, xs=None, length=None, reverse=False, checkpoints=None):
    leaves = [] if xs is None else sd_tree_leaves(xs)
    n = len(leaves[0]) if leaves else length
    carry, ys = init, [None] * n
    for k in (range(n - 1, -1, -1) if reverse else range(n)):
        x = None if xs is None else _tree_index(xs, k)
        carry, ys[k] = f(carry, x)
    if ys and ys[0] is not None:
        ys = _tree_stack(ys)
    else:
        ys = None
    return carry, ys


def sd_tree_leaves(tree):
    from symad.pytree import tree_flatten

    return tree_flatten(tree)[0]


def _tree_index(tree, k):
    from symad.pytree import tree_flatten, tree_unflatten

    leaves, treedef = tree_flatten(tree)
    return tree_unflatten(treedef, [leaf[k] for leaf in leaves])


def _tree_stack(trees):
    from symad.pytree import tree_flatten, tree_unflatten

    flat = [tree_flatten(t) for t in trees]
    treedef = flat[0][1]
    return tree_unflatten(treedef, [np.stack([f[0][i] for f in flat]) for i in range(len(flat[0][0]))])


LOOPS = {"primitive": (sd.fori_loop, sd.scan), "python": (python_fori, python_scan)}

rng = np.random.default_rng(30)
MATRIX = rng.normal(size=(3, 3)) * 0.4


# -- programs: (function of (fori, scan, checkpoints), arguments) --------------------------


def pendulum(n):
    def program(fori, scan, checkpoints, k, c):
        def body(i, state):
            theta, omega = state
            return (theta + 1e-3 * omega, omega + 1e-3 * (-k * np.sin(theta) - c * omega))
        return fori(0, n, body, (1.0, 0.0), checkpoints=checkpoints)[0]
    return program, (2.0, 0.3)


def array_carry(n):
    def program(fori, scan, checkpoints, x, w):
        def body(i, carry):
            v, total = carry
            v = np.tanh(MATRIX @ v * w + 0.1 * i)
            return (v, total + np.sum(v ** 2))
        v, total = fori(2, 2 + n, body, (x, 0.0), checkpoints=checkpoints)
        return np.sum(v * np.arange(1.0, 4.0)) + total
    return program, (rng.normal(size=3), 0.7)


def dict_carry_size_one_axes(n):
    def program(fori, scan, checkpoints, a, b):
        def body(i, carry):
            return {"p": carry["p"] * np.cos(b) + carry["q"][0], "q": carry["q"] + 0.1 * carry["p"]}
        out = fori(0, n, body, {"p": a, "q": np.reshape(b, (1, 1)) + np.zeros((1, 1))},
                   checkpoints=checkpoints)
        return out["p"] * 2.0 + np.sum(out["q"] ** 2)
    return program, (np.array([0.5]), 0.3)


def scan_several_xs(n):
    xs = (rng.normal(size=(n, 2)), rng.normal(size=n))

    def program(fori, scan, checkpoints, c0, scale):
        def step(c, x):
            c = np.sin(c * scale + x[0]) + x[1]
            return c, np.sum(c * x[0]) * scale
        carry, ys = scan(step, c0, xs, length=n, checkpoints=checkpoints)
        return np.sum(carry ** 2) + (np.sum(ys ** 3) if ys is not None else 0.0)
    return program, (rng.normal(size=2), 0.8)


def scan_reverse_no_xs(n):
    def program(fori, scan, checkpoints, a, b):
        carry, ys = scan(lambda c, _: (c * a + b, c * c), 0.5, None, length=n, reverse=True,
                         checkpoints=checkpoints)
        return carry + (np.sum(ys * np.arange(n)) if n else 0.0)
    return program, (0.9, 0.2)


def nested(n):
    def program(fori, scan, checkpoints, a, b):
        def outer(i, c):
            return fori(0, 3, lambda j, d: d * 0.9 + a * np.sin(d + j * b), c,
                        checkpoints=checkpoints) + 0.1
        return fori(0, n, outer, 1.0, checkpoints=checkpoints)
    return program, (0.3, 0.2)


PROGRAMS = {"pendulum": pendulum, "array_carry": array_carry,
            "dict_carry_size_one_axes": dict_carry_size_one_axes, "scan_several_xs": scan_several_xs,
            "scan_reverse_no_xs": scan_reverse_no_xs, "nested": nested}
STEPS = [0, 1, 2, 7]


def _both(name, n, checkpoints=None):
    program, args = PROGRAMS[name](n)
    loop = lambda *a: program(*LOOPS["primitive"], checkpoints, *a)  # noqa: E731
    unrolled = lambda *a: program(*LOOPS["python"], checkpoints, *a)  # noqa: E731
    return loop, unrolled, args


def _close(a, b, tol=1e-11):
    from symad.pytree import tree_flatten

    la, lb = tree_flatten(a)[0], tree_flatten(b)[0]
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x, dtype=float), np.asarray(y, dtype=float),
                                   rtol=tol, atol=tol)


CASES = [(name, n) for name in PROGRAMS for n in STEPS]


@pytest.mark.parametrize("name,n", CASES)
def test_values_match_the_unrolled_loop(name, n):
    loop, unrolled, args = _both(name, n)
    _close(loop(*args), unrolled(*args))
    _close(sd.trace(loop, *args)(*args), unrolled(*args))


TRANSFORMS = {
    "grad": lambda f: sd.grad(f, argnums=(0, 1)),
    "jacfwd": lambda f: sd.jacfwd(f, argnums=(0, 1)),
    "jacrev": lambda f: sd.jacrev(f, argnums=(0, 1)),
    "hessian": lambda f: sd.hessian(f, argnums=1),
    "jvp": lambda f: (lambda *a: sd.jvp(f, a, tuple(np.ones_like(np.asarray(x, dtype=float))
                                                     for x in a))),
    "vjp": lambda f: (lambda *a: _pull_ones(*sd.vjp(f, *a))),
}


def _pull_ones(out, pullback):
    return pullback(np.ones_like(out))


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_every_transform_matches_the_unrolled_loop(name, transform):
    loop, unrolled, args = _both(name, 7)
    _close(TRANSFORMS[transform](loop)(*args), TRANSFORMS[transform](unrolled)(*args), 1e-10)


@pytest.mark.parametrize("transform", ["grad", "hessian"])
@pytest.mark.parametrize("checkpoints", [2, "sqrt", ("levels", 3)], ids=str)
@pytest.mark.parametrize("name,n", [(name, n) for name in PROGRAMS for n in (1, 7)])
def test_checkpointed_reverse_mode_matches_the_unrolled_loop(name, n, checkpoints, transform):
    loop, unrolled, args = _both(name, n, checkpoints)
    _close(TRANSFORMS[transform](loop)(*args), TRANSFORMS[transform](unrolled)(*args), 1e-10)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_vmap_over_loops_matches_the_unrolled_loop(name):
    loop, unrolled, args = _both(name, 4)
    batch = [np.stack([np.asarray(a, dtype=float) * s for s in (1.0, 0.9, 1.1)]) for a in args]
    _close(sd.vmap(loop)(*batch), sd.vmap(unrolled)(*batch))
    _close(sd.vmap(sd.grad(loop, argnums=(0, 1)))(*batch), sd.vmap(sd.grad(unrolled, argnums=(0, 1)))(*batch))


def test_derivative_and_taylor_through_loops():
    loop = lambda a: sd.fori_loop(0, 4, lambda i, c: c * np.sin(a) + i * a, a)  # noqa: E731
    unrolled = lambda a: python_fori(0, 4, lambda i, c: c * np.sin(a) + i * a, a)  # noqa: E731
    points = np.array([0.3, -1.2, 2.0])
    for order in (1, 2, 3):
        _close(sd.derivative(loop, order)(points), sd.derivative(unrolled, order)(points), 1e-10)
    _close(sd.taylor(loop, 3)(0.7), sd.taylor(unrolled, 3)(0.7), 1e-10)
    with pytest.raises(DifferentiationError, match="loop"):
        sd.taylor(loop, 60)(0.7)


def test_gradients_against_central_differences_at_ten_thousand_steps():
    loop, unrolled, (k, c) = _both("pendulum", 10_000)
    gk, gc = sd.grad(loop, argnums=(0, 1))(k, c)
    h = 1e-6
    assert abs(gk - (loop(k + h, c) - loop(k - h, c)) / (2 * h)) < 1e-7
    assert abs(gc - (loop(k, c + h) - loop(k, c - h)) / (2 * h)) < 1e-7
    _close((gk, gc), sd.grad(unrolled, argnums=(0, 1))(k, c), 1e-10)
    _close(sd.grad(_both("pendulum", 10_000, "sqrt")[0], argnums=(0, 1))(k, c), (gk, gc), 1e-12)


def test_the_loop_is_one_node_whatever_the_steps():
    def nodes(n, transform=lambda f: f):
        program, args = pendulum(n)
        f = transform(lambda k, c: program(sd.fori_loop, sd.scan, None, k, c))
        return sd.trace(f, *args).stats()["nodes"] if hasattr(f, "__code__") else f.trace(*args).stats()["nodes"]

    assert nodes(10) == nodes(10 ** 6)
    grad = lambda f: sd.grad(f, argnums=(0, 1))  # noqa: E731
    assert nodes(10, grad) == nodes(10 ** 6, grad) <= 12
    assert sd.trace(lambda k, c: pendulum(10)[0](sd.fori_loop, sd.scan, None, k, c), 2.0, 0.3) \
        .stats()["operations"]["loop"] == 1


def test_a_million_steps_and_their_gradient():
    loop, _, (k, c) = _both("pendulum", 10 ** 6)
    value = loop(k, c)
    assert np.isfinite(value)
    assert np.all(np.isfinite(sd.grad(loop, argnums=(0, 1))(k, c)))


def test_checkpoints_bound_the_memory_of_reverse_mode():
    n = 200_000

    def peak(checkpoints):
        loop = _both("pendulum", n, checkpoints)[0]
        gradient = sd.grad(loop, argnums=(0, 1))
        gradient(2.0, 0.3)
        tracemalloc.start()
        try:
            result = gradient(2.0, 0.3)
            return tracemalloc.get_traced_memory()[1], result
        finally:
            tracemalloc.stop()

    stored, full = peak(None)
    kept, checkpointed = peak("sqrt")
    _close(full, checkpointed, 1e-12)
    assert stored > 2 * n * 8  # every carry of two floats
    assert kept < stored / 20


def test_checkpoint_wrapper_is_the_sqrt_schedule():
    body = lambda i, y: y * 0.99 + 0.01 * i  # noqa: E731
    marked = sd.checkpoint(body)
    assert marked(1.0, 2.0) == body(1.0, 2.0)
    f = lambda x: sd.fori_loop(0, 50, sd.checkpoint(lambda i, y: y * 0.99 + x * i), x)  # noqa: E731
    g = lambda x: python_fori(0, 50, lambda i, y: y * 0.99 + x * i, x)  # noqa: E731
    _close(sd.grad(f)(0.5), sd.grad(g)(0.5))
    spec = next(dict(node.params)["loop"] for node in sd.trace(f, 0.5).graph.nodes
                if node.primitive.name == "loop")
    assert spec.checkpoints == "sqrt"


def test_while_loop_forward_mode_and_its_refusal_in_reverse():
    f = lambda a: sd.while_loop(lambda x: x < 100.0, lambda x: 3.0 * x * a, 1.0)  # noqa: E731
    assert float(f(1.1)) == pytest.approx((3.3) ** 4)
    value, tangent = sd.jvp(f, (1.1,), (1.0,))
    assert float(tangent) == pytest.approx(4 * 81 * 1.1 ** 3)
    batch = sd.vmap(f)(np.array([1.0, 2.0, 5.0]))   # each point its own number of steps
    np.testing.assert_allclose(batch, [243.0, 216.0, 225.0])
    with pytest.raises(DifferentiationError, match="forward mode only.*fori_loop"):
        sd.grad(f)(1.1)


@pytest.mark.parametrize("language", [
    pytest.param("c", marks=pytest.mark.skipif(c_compiler() is None, reason="no C compiler")),
    pytest.param("numba", marks=pytest.mark.skipif(not numba_available(), reason="no numba"))])
@pytest.mark.parametrize("name", [name for name in PROGRAMS if name != "nested"])
def test_compiled_kernels_and_numpy_step_by_step_agree(monkeypatch, language, name):
    # The kernel in C (where there is a compiler) or numba against the body's NumPy
    # evaluator run step by step, values and gradients, on a batch of points.
    from symad.compile.scalar import tape_c
    from symad.loops import compiled, evaluation

    if language == "numba":
        monkeypatch.setattr(tape_c, "c_compiler", lambda: None)
    loop, _, args = _both(name, 500)
    scales = np.array([1.0, 0.9, 1.1])  # a batch of three points, in front of each argument
    batch = [np.asarray(a, float)[None] * scales.reshape((3,) + (1,) * np.ndim(a)) for a in args]
    F, G = sd.trace(loop, *args), sd.grad(loop, argnums=(0, 1)).trace(*args)
    values, gradient = F(*batch), G(*batch)
    spec = next(dict(n.params)["loop"] for n in F.graph.nodes if n.primitive.name == "loop")
    kernel = compiled._kernel(spec)
    assert kernel is not None and (kernel.__module__ == compiled.__name__) == (language == "c")
    monkeypatch.setattr(evaluation, "compiled_window", lambda *arguments: None)
    F, G = sd.trace(loop, *args), sd.grad(loop, argnums=(0, 1)).trace(*args)
    _close(F(*batch), values, 1e-14)
    _close(G(*batch), gradient, 1e-14)


def test_batches_of_points_run_inside_the_loop():
    loop, unrolled, _ = _both("pendulum", 50)
    F = sd.trace(loop, 2.0, 0.3)
    ks = np.linspace(1.0, 3.0, 5)
    _close(F(ks, 0.3), np.array([unrolled(k, 0.3) for k in ks]))
    G = sd.grad(loop, argnums=(0, 1)).trace(2.0, 0.3)
    _close(G(ks, 0.3), tuple(np.array([sd.grad(unrolled, argnums=(0, 1))(k, 0.3) for k in ks]).T))


BAD_CALLS = [
    (lambda x: sd.fori_loop(0, x, lambda i, c: c, 1.0), TracingError, "bound is a traced value"),
    (lambda x: sd.fori_loop(0, 2.5, lambda i, c: c, x), TypeError, "must be an int"),
    (lambda x: sd.fori_loop(0, 2, lambda i, c: (c, c), x), TracingError, "structure"),
    (lambda x: sd.fori_loop(0, 2, lambda i, c: c + np.zeros(2), x), TracingError, "shapes"),
    (lambda x: sd.scan(lambda c, v: (c, v), x, (np.zeros(2), np.zeros(3))), ValueError, "disagree"),
    (lambda x: sd.scan(lambda c, v: (c, v), x), ValueError, "length="),
    (lambda x: sd.fori_loop(0, 2, lambda i, c: c, x, checkpoints=0), ValueError, "checkpoints"),
    (lambda x: sd.fori_loop(0, 2, lambda i, c: c, x, checkpoints=("levels", 1)), ValueError, "levels"),
    (lambda x: sd.while_loop(lambda c: c, lambda c: c, np.zeros(2) + x), TracingError, "one scalar"),
]


@pytest.mark.parametrize("call,error,words", BAD_CALLS)
def test_bad_input_gets_a_clear_error(call, error, words):
    with pytest.raises(error, match=words):
        sd.trace(call, 1.0)


def test_latex_prints_the_recurrence_and_the_adjoint_recurrence():
    program, args = pendulum(10_000)

    def loop(k, c, n=10_000):
        return pendulum(n)[0](sd.fori_loop, sd.scan, None, k, c)
    F = sd.trace(loop, *args)
    text = F.latex()
    assert "{state_{0}}_{i + 1} &= {state_{0}}_{i} + 0.001 {state_{1}}_{i}" in text
    assert "i = 0, \\ldots, 9999" in text and "{state_{0}}_{0} &= 1" in text
    gradient = sd.grad(loop, argnums=(0, 1)).trace(*args).latex()
    assert "i = 9999, \\ldots, 0" in gradient
    assert "{\\bar{k}}_{i} &= - 0.001 \\sin{\\left({state_{0}}_{i} \\right)} {\\bar{state_{1}}}_{i + 1}" in gradient
    assert len(gradient) < 2048
    def million(k, c):
        return loop(k, c, 10 ** 6)

    assert gradient.replace("\\mathrm{loop}", "\\mathrm{million}") == sd.grad(million, argnums=(0, 1)).trace(*args).latex() \
        .replace("999999", "9999").replace("1000000", "10000").replace("1000002", "10002")
    tangent = sd.jacfwd(loop, argnums=0).trace(*args).latex()
    assert "\\dot{k} \\sin" in tangent and "{\\dot{state_{1}}}_{i + 1} &=" in tangent


def test_formula_prints_each_output_as_its_leaf_of_the_recurrence():
    # str() of a loop in formula() is its recurrence; each output is the leaf it reads (a
    # two-carry loop's outputs are s0 and s1 after the last step, not the same expression),
    # and of the gradient the adjoint recurrence's leaves at step 0.
    def two(k, c):
        body = lambda i, s: (s[0] + 1e-3 * s[1], s[1] + 1e-3 * (-k * np.sin(s[0]) - c * s[1]))  # noqa: E731
        return sd.fori_loop(0, 100, body, (1.0, 0.0))

    first, second = (str(e) for e in sd.trace(two, 2.0, 0.3).formula())
    recurrence = ("fori_loop(i = 0..99: s0[i + 1] = s0[i] + 0.001*s1[i], "
                  "s1[i + 1] = -0.001*c*s1[i] - 0.001*k*sin(s0[i]) + s1[i]; s0[0] = 1, s1[0] = 0)")
    assert first == recurrence + "[s0[100]]" and second == recurrence + "[s1[100]]"
    formula = sd.trace(two, 2.0, 0.3).formula()[0]
    assert {s.name for s in formula.free_symbols} == {"c", "k"}
    dk, dc = (str(e) for e in sd.grad(lambda k, c: two(k, c)[0], argnums=(0, 1)).trace(2.0, 0.3).formula())
    assert dk.endswith("[kbar[0]]") and dc.endswith("[cbar[0]]")
    assert "kbar[i] = -0.001*sin(s0[i])*s1bar[i + 1] + kbar[i + 1]" in dk
    assert "s0bar[100] = 1, s1bar[100] = 0" in dk and dk.startswith("fori_loop(i = 99..0: ")
    ys = sd.trace(lambda a: sd.scan(lambda c, x: (c * a, c + x), 1.0, np.arange(3.0))[1], 2.0).formula()
    assert str(ys).endswith("; c[0] = 1)[y0[i]]")


@pytest.mark.parametrize("levels", [3, 4])
@pytest.mark.parametrize("n", [2, 30, 100])
def test_nested_checkpoints_give_the_gradient_of_every_stored_carry(n, levels):
    # ("levels", L): segments of about n^(1/L) steps within segments, L deep; the gradient is
    # the one that stores every carry, to rounding, and so is a scan's with xs and ys.
    def pendulum_end(k, c, checkpoints):
        body = lambda i, s: (s[0] + 1e-3 * s[1], s[1] + 1e-3 * (-k * np.sin(s[0]) - c * s[1]))  # noqa: E731
        return sd.fori_loop(0, n, body, (1.0, 0.0), checkpoints=checkpoints)[0]

    stored = sd.grad(lambda k, c: pendulum_end(k, c, None), argnums=(0, 1))(2.0, 0.3)
    nested = sd.grad(lambda k, c: pendulum_end(k, c, ("levels", levels)), argnums=(0, 1))(2.0, 0.3)
    _close(nested, stored, 1e-13)

    def scanned(a, checkpoints):
        step = lambda c, x: (c * 0.9 + a * np.sin(x * c), c * x * a)  # noqa: E731
        c, ys = sd.scan(step, 1.0, np.linspace(0, 1, n), checkpoints=checkpoints)
        return c + np.sum(ys ** 2)

    _close(sd.grad(lambda a: scanned(a, ("levels", levels)))(0.7),
           sd.grad(lambda a: scanned(a, None))(0.7), 1e-12)


def test_nested_checkpoints_segment_lengths():
    from symad.loops.checkpoints import segment_length
    from symad.loops.spec import LoopSpec

    def m(n, checkpoints):
        return segment_length(LoopSpec(None, n, 0, False, [()], [], [], [], "f", checkpoints=checkpoints))

    assert [m(10 ** 6, ("levels", 2)), m(10 ** 6, "sqrt"), m(10 ** 6, ("levels", 3)), m(8, ("levels", 3))] \
        == [1000, 1000, 100, 2]
    assert m(10 ** 6 + 1, ("levels", 3)) == 101   # segments^L covers every step


@pytest.mark.skipif(c_compiler() is None, reason="no C compiler")
@pytest.mark.parametrize("reverse", [False, True])
def test_a_large_body_of_arrays_runs_its_own_c_function_each_step(monkeypatch, reverse):
    # Past MAX_KERNEL_ELEMENTS the body is not expanded: the kernel calls the body's F.to_c
    # function once per step (loop nests over a 300-point grid, scanned rows of 300, stacked
    # outputs of 300). Values and gradients against the body's NumPy evaluator per step.
    from symad.loops import compiled, evaluation

    grid = np.linspace(0.0, np.pi, 300)
    forcing = np.sin(np.outer(np.arange(12.0), grid) * 0.01)

    def heat(alpha):
        def step(u, f):
            lap = np.concatenate([u[:1] * 0, u[2:] - 2 * u[1:-1] + u[:-2], u[:1] * 0])
            new = u + alpha * 0.1 * lap + 1e-3 * f
            return new, new * f
        u, ys = sd.scan(step, np.sin(grid), forcing, reverse=reverse)
        return np.sum(u ** 2) + np.sum(ys)

    F, G = sd.trace(heat, 0.5), sd.grad(heat).trace(0.5)
    points = np.array([0.5, 0.3, 0.7])
    values, gradients = F(points), G(points)
    spec = next(dict(n.params)["loop"] for n in F.graph.nodes if n.primitive.name == "loop")
    assert sum(compiled.slots(spec)) > compiled.MAX_KERNEL_ELEMENTS
    assert compiled.loop_kernel_c_source(spec) is None and "symad_body(in, out);" in compiled.loop_body_c_source(spec)
    assert compiled._kernel(spec).__module__ == compiled.__name__
    monkeypatch.setattr(evaluation, "compiled_window", lambda *arguments: None)
    F, G = sd.trace(heat, 0.5), sd.grad(heat).trace(0.5)
    _close(F(points), values, 1e-13)
    _close(G(points), gradients, 1e-12)


# -- while_loop in compiled kernels ----------------------------------------------------------

WHILE_PROGRAMS = {
    # Newton's iteration for sqrt(a): a body of scalars; the points stop at different steps.
    "scalars": (lambda a: sd.while_loop(lambda s: np.abs(s[0] * s[0] - a) > 1e-12,
                                        lambda s: (0.5 * (s[0] + a / s[0]), s[1] + 1.0),
                                        (a + 1.0, 0.0)),
                np.array([2.0, 9.0, 1e6])),
    # A 3-vector state, expanded into scalars in the kernel; the condition reads all of it.
    "small array": (lambda a: sd.while_loop(lambda v: np.sum(v ** 2) < 50.0 * a,
                                            lambda v: v * 1.1 + np.array([0.1, -0.2, 0.3]) * a,
                                            np.ones(3) * 0.5),
                    np.array([0.5, 1.0, 3.0])),
    # 300 values: the kernel calls the body's own C function once per step.
    "large array": (lambda a: sd.while_loop(lambda u: np.max(u) < a,
                                            lambda u: u + 0.01 * np.roll(u, 1) + 0.001,
                                            np.linspace(0.0, 1.0, 300)),
                    np.array([1.5, 2.0, 1.0])),
}


@pytest.mark.parametrize("language", [
    pytest.param("c", marks=pytest.mark.skipif(c_compiler() is None, reason="no C compiler")),
    pytest.param("numba", marks=pytest.mark.skipif(not numba_available(), reason="no numba"))])
@pytest.mark.parametrize("name", list(WHILE_PROGRAMS))
def test_while_loops_run_in_compiled_kernels(monkeypatch, language, name):
    # Against the body's NumPy evaluator step by step: values and forward-mode tangents on a
    # batch whose points take different numbers of steps, and a kernel that returns to Python
    # every 3 steps (WHILE_STEPS_PER_CALL) and is called on.
    from symad.compile.scalar import tape_c
    from symad.loops import compiled, evaluation

    if name == "large array" and language == "numba":
        pytest.skip("numba's kernels take bodies of scalars and small arrays only")
    if language == "numba":
        monkeypatch.setattr(tape_c, "c_compiler", lambda: None)
    f, points = WHILE_PROGRAMS[name]
    F = sd.trace(f, points[0])
    J = sd.jacfwd(f).trace(points[0])
    spec = next(dict(n.params)["loop"] for n in F.graph.nodes if n.primitive.name == "while_loop")
    kernel = compiled._kernel(spec)
    assert kernel is not None and (kernel.__module__ == compiled.__name__) == (language == "c")
    values, tangents = F(points), J(points)
    monkeypatch.setattr(compiled, "WHILE_STEPS_PER_CALL", 3)
    _close(F(points), values, 0.0)
    monkeypatch.setattr(evaluation, "compiled_while", lambda *arguments: None)
    F, J = sd.trace(f, points[0]), sd.jacfwd(f).trace(points[0])
    _close(F(points), values, 1e-14)
    _close(J(points), tangents, 1e-14)


def test_a_while_loop_that_does_not_step_and_one_at_nan():
    f = lambda x: sd.while_loop(lambda v: v < 1.0, lambda v: v + 1.0, x)  # noqa: E731
    F = sd.trace(f, 0.5)
    np.testing.assert_array_equal(F(np.array([5.0, 0.5, -1.5])), [5.0, 1.5, 1.5])
    assert np.isnan(F(np.nan))  # nan < 1 is false, as in NumPy: no step is taken


# -- complex values: carried as their real and imaginary parts ---------------------------------


def _complex_programs():
    """(name, loop program of (fori, scan, a), as JAX writes it): complex carries, slices,
    outputs and complex values read from outside, each to a real result."""
    xs = np.arange(4.0) + 0.5j

    def carry(fori, scan, a):
        return np.abs(fori(0, 3, lambda i, z: z * (0.3j + a), a + 1j)) ** 2

    def scanned_and_outputs(fori, scan, a):
        step = lambda c, x: (c * np.exp(1j * a * x) + x, c * x)  # noqa: E731
        c, ys = scan(step, 1.0 + 0j, xs)
        return np.real(np.sum(ys)) + np.imag(c)

    def read_from_outside(fori, scan, a):
        w = a * 1j + 1.0
        return fori(0, 3, lambda i, z: z + np.real(w * w * z), 1.0)

    def pytree_with_a_complex_array(fori, scan, a):
        out = fori(0, 4, lambda i, s: {"z": s["z"] * np.exp(1j * s["r"]), "r": s["r"] + 0.1 * a},
                   {"z": np.array([1.0 + 1j, 0.4 - 0.5j]) * a, "r": a})
        return np.sum(np.abs(out["z"] + 1.0) ** 2) + out["r"]

    def inside_one_step(fori, scan, a):
        return fori(0, 5, lambda i, z: z + np.real(0.3 * 1j * np.exp(1j * z)) * np.abs(z + 2j), a)

    return {f.__name__: f for f in (carry, scanned_and_outputs, read_from_outside,
                                    pytree_with_a_complex_array, inside_one_step)}


COMPLEX_PROGRAMS = _complex_programs()


@pytest.mark.parametrize("checkpoints", [None, ("binomial", 1)], ids=str)
@pytest.mark.parametrize("name", list(COMPLEX_PROGRAMS))
def test_complex_values_go_through_loops(name, checkpoints):
    # Before: the imaginary part of a complex carry was cast away (a wrong number), or the C
    # kernel's printer raised TypeError.
    program = COMPLEX_PROGRAMS[name]
    fori = lambda *a: sd.fori_loop(*a, checkpoints=checkpoints)  # noqa: E731
    scan = lambda *a: sd.scan(*a, checkpoints=checkpoints)  # noqa: E731
    loop = lambda a: program(fori, scan, a)  # noqa: E731
    unrolled = lambda a: program(python_fori, python_scan, a)  # noqa: E731
    for transform in (lambda f: f, sd.grad, sd.hessian, sd.jacfwd):
        _close(transform(loop)(0.7), transform(unrolled)(0.7), 1e-12)
    _close(sd.vmap(sd.grad(loop))(np.array([0.7, -0.2])),
           np.array([sd.grad(unrolled)(0.7), sd.grad(unrolled)(-0.2)]))
    h = 1e-6
    assert abs(sd.grad(loop)(0.7) - (loop(0.7 + h) - loop(0.7 - h)) / (2 * h)) < 1e-6


def test_a_complex_while_loop_and_a_complex_result():
    f = lambda a: sd.while_loop(lambda z: np.abs(z) < 3.0, lambda z: z * 1.5 * np.exp(0.1j * a), a + 1j)  # noqa: E731
    z, expected = f(0.5), 0.5 + 1j
    while abs(expected) < 3.0:
        expected = expected * 1.5 * np.exp(0.05j)
    assert np.iscomplexobj(z) and abs(z - expected) < 1e-14
    value, tangent = sd.jvp(lambda a: np.real(f(a)), (0.5,), (1.0,))
    h = 1e-7
    assert abs(tangent - (np.real(f(0.5 + h)) - np.real(f(0.5 - h))) / (2 * h)) < 1e-6


def test_a_real_carry_made_complex_is_refused_saying_what_to_write():
    # JAX refuses a carry whose type changes too.
    with pytest.raises(TracingError, match=r"complex value for a real leaf of the carry.*\+ 0j"):
        sd.fori_loop(0, 3, lambda i, z: z * 1j, 1.0)


# -- found by the random loop programs (tests/random_loops.py) ----------------------------------


def test_hessian_of_a_scan_over_an_empty_array():
    # Before: ValueError "cannot reshape array of size 0 into shape (1,0,newaxis)" when
    # packing the loop's results for the Hessian's rows of the empty scanned array.
    def f(c, xs):
        return sd.scan(lambda c, x: (0.6 * c + 0.4 * np.tanh(c * x), None), c, xs)[0]

    def unrolled(c, xs):
        return python_scan(lambda c, x: (0.6 * c + 0.4 * np.tanh(c * x), None), c, xs)[0]

    args = (np.array(0.5), np.zeros(0))
    hessian = sd.hessian(f, argnums=(0, 1))(*args)
    assert np.shape(hessian[1][1]) == (0, 0) and np.shape(hessian[0][1]) == (0,)
    _close(hessian, sd.hessian(unrolled, argnums=(0, 1))(*args))
    assert float(hessian[0][0]) == 0.0  # f(c) = c at 0 steps


@pytest.mark.parametrize("checkpoints", [1, 2, ("levels", 2)], ids=str)
def test_checkpointed_gradient_where_padded_steps_would_be_singular(checkpoints):
    # n = 3 steps in segments of 2: the scanned array is padded to 4 steps. It was padded
    # with zeros, where norm(c * x) has a nan derivative; the guard multiplies it by 0,
    # and 0 * nan made the whole gradient nan. Now padded with the last step.
    def program(scan):
        def f(c, xs):
            def body(carry, x):
                c1, c2 = carry
                v = np.linalg.norm(c1 * x)
                return (0.6 * c1 + 0.4 * np.tanh(v), 0.6 * c2 + 0.4 * np.tanh(v)), None
            (c1, c2), _ = scan(body, (c, np.full((1,), -0.3)), xs)
            return c1 + np.sum(c2)
        return f

    args = (np.array(0.67), np.array([0.5, 0.7, 0.9]))
    got = sd.grad(program(lambda *a: sd.scan(*a, checkpoints=checkpoints)), argnums=(0, 1))(*args)
    want = sd.grad(program(python_scan), argnums=(0, 1))(*args)
    assert np.all(np.isfinite(got[1]))
    _close(got, want, 1e-12)
