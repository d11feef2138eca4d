"""Array programs: one node per whole-array operation, every transform at array level.

Each array primitive is checked through the programs below against JAX's gradients
(hard-coded: ``jax.grad`` of the same definitions with ``jax.numpy``, JAX 0.10.2 with
x64 enabled, 2026-11-25) and against central differences; shapes cover broadcasting,
0-d, size-1 and empty axes. Graph sizes do not depend on the data size, and random
array programs agree with their per-element versions (``F.expand()``).
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import symad as sd
import symad.numpy as snp
from symad.compile.registry import numba_available

onp = np  # the programs below are written against a NumPy-like namespace `np`


A = onp.array([[0.3, -1.2, 0.7], [1.1, 0.4, -0.5]])        # (2, 3)
V = onp.array([0.2, -0.7, 1.3])                              # (3,)
S = onp.array(0.6)                                           # 0-d
C = onp.array([[0.5], [-1.5]])                               # (2, 1)
M = onp.array([[0.9, -0.3], [0.2, 0.8], [-0.6, 0.4]])       # (3, 2)

def cases(np, logsumexp):
    """The programs, written with the namespace ``np`` (NumPy here, jax.numpy for the references)."""
    return {
        "sum_axis0": (lambda a: np.sum(np.sin(a).sum(axis=0) ** 2), (A,)),
        "mean_keepdims": (lambda a: np.sum(np.exp(a - np.mean(a, axis=1, keepdims=True))), (A,)),
        "prod_axis1": (lambda a: np.sum(np.prod(a + 2.0, axis=1)), (A,)),
        "max_axis1": (lambda a: np.sum(np.max(a, axis=1) * np.array([1.0, -2.0])), (A,)),
        "min_all": (lambda a: np.min(a) ** 2, (A,)),
        "logsumexp_axis0": (lambda a: np.sum(logsumexp(a, axis=0) * V), (A,)),
        "norm": (lambda a: np.linalg.norm(a) * np.sum(a), (A,)),
        "matmul": (lambda a, m: np.sum(np.tanh(a @ m)), (A, M)),
        "matvec": (lambda a, v: np.sum((a @ v) ** 2), (A, V)),
        "vecmat": (lambda v, m: np.sum(np.cos(v @ m)), (V, M)),
        "dot_vectors": (lambda v: np.dot(v, v[::-1]), (V,)),
        "einsum_trace": (lambda m, a: np.einsum("ij,ji->", m, a), (M, A)),
        "einsum_outer": (lambda v: np.sum(np.einsum("i,j->ij", v, v) ** 2), (V,)),
        "tensordot": (lambda a, m: np.sum(np.tensordot(a, m, axes=([1], [0])) ** 3), (A, M)),
        "transpose": (lambda a: np.sum(a.T * M), (A,)),
        "reshape": (lambda a: np.sum(a.reshape(3, 2) * M), (A,)),
        "broadcast_to": (lambda v: np.sum(np.broadcast_to(v, (4, 3)) ** 2 * np.arange(12.0).reshape(4, 3)), (V,)),
        "broadcast_column": (lambda c, a: np.sum(np.sin(c * a)), (C, A)),
        "broadcast_scalar": (lambda s, a: np.sum(np.exp(s * a)), (S, A)),
        "slice_steps": (lambda a: np.sum(a[:, ::2] ** 2) + np.sum(a[::-1, 1:] * 3.0), (A,)),
        "integer_index": (lambda v: np.sum(v[np.array([2, 0, 2])] ** 3), (V,)),
        "rows_and_labels": (lambda a: np.sum(np.log(np.exp(a)[np.arange(2), np.array([2, 0])])), (A,)),
        "concatenate": (lambda a, v: np.sum(np.concatenate([a, v[None, :]], axis=0) ** 2 * np.arange(9.0).reshape(3, 3)), (A, V)),
        "stack": (lambda v: np.sum(np.stack([v, v ** 2], axis=1) * np.arange(6.0).reshape(3, 2)), (V,)),
        "pad_constant": (lambda v: np.sum(np.pad(v, 1) * np.arange(5.0)), (V,)),
        "pad_edge": (lambda a: np.sum(np.pad(a, 1, mode="edge") ** 2), (A,)),
        "roll": (lambda v: np.sum(np.roll(v, 1) * np.arange(3.0)), (V,)),
        "cumsum": (lambda a: np.sum(np.cumsum(a, axis=1) ** 2), (A,)),
        "diff": (lambda v: np.sum(np.diff(v) ** 2), (V,)),
        "flip": (lambda a: np.sum(np.flip(a, axis=1) * A), (A,)),
        "where": (lambda a: np.sum(np.where(a > 0, a ** 2, np.sin(a))), (A,)),
        "maximum": (lambda a: np.sum(np.maximum(a, 0.1 * a)), (A,)),
        "clip": (lambda a: np.sum(np.clip(a, -0.5, 0.8) ** 2), (A,)),
        "var": (lambda a: np.var(a, axis=0).sum(), (A,)),
        "sort_rows": (lambda a: np.sum(np.sort(a, axis=1) ** 2 * np.arange(6.0).reshape(2, 3)), (A,)),
        "argsort_gather_median": (lambda v: np.sum(v[np.argsort(v)][::-1][:2] ** 3) + np.median(v) * np.sum(v),
                                  (V,)),
    }


#: jax.grad of each program w.r.t. every argument (see the module docstring).
JAX_GRADIENTS = {
    'sum_axis0': [[[2.2674482942830183, -0.39324566840916847, 0.252079974816295], [1.0765900429085276, -0.9995736030415049, 0.289237431954391]]],
    'mean_keepdims': [[[0.13709881448447048, -0.9838597806331908, 0.8467609661487203], [0.9338735741282835, -0.1497663384440575, -0.7841072356842256]]],
    'prod_axis1': [[[2.16, 6.21, 1.8399999999999999], [3.5999999999999996, 4.65, 7.4399999999999995]]],
    'max_axis1': [[[0.0, 0.0, 1.0], [-2.0, -0.0, -0.0]]],
    'min_all': [[[-0.0, -2.4, -0.0], [-0.0, -0.0, -0.0]]],
    'logsumexp_axis0': [[[0.06200510377447751, -0.11758713040625285, 0.9990822185487229], [0.1379948962255225, -0.582412869593747, 0.3009177814512771]]],
    'norm': [[[2.0336725832405214, 1.4047016812073707, 2.2013981571160284], [2.3691237309915354, 2.0756039767093983, 1.6982214354895078]]],
    'matmul': [[[0.6014377371910231, 0.6376041451511929, -0.2846620342304593], [-0.08203943401530198, 0.8113119002543729, 0.24612592960814905]], [[0.5093175065896541, 1.2273260406340465], [-0.9433498856566457, -0.3149127961854413], [0.4895140921496004, -0.07154483368908948]]],
    'matvec': [[[0.724, -2.534, 4.7059999999999995], [-0.284, 0.9939999999999999, -1.8459999999999999]], [-0.4760000000000002, -4.911999999999999, 3.2439999999999998]],
    'vecmat': [[0.5769090954712821, 0.21472431564309152, -0.36463938031815574], [[0.13485758232562903, 0.01996668332936562], [-0.4720015381397015, -0.06988339165277967], [0.8765742851165886, 0.12978344164087655]]],
    'dot_vectors': [[2.6, -1.4, 0.4]],
    'einsum_trace': [[[0.3, 1.1], [-1.2, 0.4], [0.7, -0.5]], [[0.9, 0.2, -0.6], [-0.3, 0.8, 0.4]]],
    'einsum_outer': [[1.776, -6.215999999999999, 11.544]],
    'tensordot': [[[-0.12294000000000009, 1.5142200000000001, 0.4377000000000001], [5.027940000000001, 1.23198, -3.325500000000001]], [[6.330660000000002, 0.6791399999999999], [1.7047200000000007, -2.08152], [-2.4959400000000005, 1.1789399999999999]]],
    'transpose': [[[0.9, 0.2, -0.6], [-0.3, 0.8, 0.4]]],
    'reshape': [[[0.9, -0.3, 0.2], [0.8, -0.6, 0.4]]],
    'broadcast_to': [[7.200000000000001, -30.799999999999997, 67.6]],
    'broadcast_column': [[[-0.0362105155176361], [-0.12274316616044664]], [[0.4943855389680211, 0.41266780745483916, 0.46968635642368944], [0.11868133321010113, -1.2380034223645173, -1.0975333033107313]]],
    'broadcast_scalar': [3.1067977083475586, [[0.718330417873086, 0.292051353575983, 0.9131769333711803], [1.160875400641219, 0.7627494901928428, 0.4444909324090307]]],
    'slice_steps': [[[0.6, 3.0, 4.4], [2.2, 3.0, 2.0]]],
    'integer_index': [[0.12000000000000002, 0.0, 10.14]],
    'rows_and_labels': [[[0.0, 0.0, 1.0], [0.9999999999999999, 0.0, 0.0]]],
    'concatenate': [[[0.0, -2.4, 2.8], [6.6000000000000005, 3.2, -5.0]], [2.4000000000000004, -9.799999999999999, 20.8]],
    'stack': [[0.4, -2.1999999999999993, 17.0]],
    'pad_constant': [[1.0, 2.0, 3.0]],
    'pad_edge': [[[2.4, -4.8, 5.6], [8.8, 1.6, -4.0]]],
    'roll': [[1.0, 2.0, 0.0]],
    'sort_rows': [[[0.6, 0.0, 2.8], [11.0, 3.2, -3.0]]],
    'argsort_gather_median': [[1.12, 0.2, 5.2700000000000005]],
    'cumsum': [[[-1.5999999999999996, -2.1999999999999997, -0.3999999999999999], [7.2, 5.0, 2.0]]],
    'diff': [[1.7999999999999998, -5.8, 4.0]],
    'flip': [[[0.7, -1.2, 0.3], [-0.5, 0.4, 1.1]]],
    'where': [[[0.6, 0.3623577544766736, 1.4], [2.2, 0.8, 0.8775825618903728]]],
    'maximum': [[[1.0, 0.1, 1.0], [1.0, 1.0, 0.1]]],
    'clip': [[[0.6, -0.0, 1.4], [0.0, 0.8, -0.5]]],
    'var': [[[-0.4, -0.8, 0.6], [0.4, 0.8, -0.6]]],
}


CASES = cases(np, snp.logsumexp)


def central_differences(f, args, position, h=1e-6):
    x = np.array(args[position], dtype=float)
    gradient = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[index] += h
        down[index] -= h
        plus = list(args)
        plus[position] = up
        minus = list(args)
        minus[position] = down
        gradient[index] = (f(*plus) - f(*minus)) / (2 * h)
    return gradient


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_of_every_array_primitive_matches_jax_and_central_differences(name):
    f, args = CASES[name]
    positions = tuple(range(len(args)))
    gradients = sd.grad(f, argnums=positions)(*args)
    for position, (gradient, expected) in enumerate(zip(gradients, JAX_GRADIENTS[name])):
        assert gradient.shape == np.shape(args[position])
        np.testing.assert_allclose(gradient, expected, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gradient, central_differences(f, args, position), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(sd.trace(f, *args)(*args), f(*args), rtol=1e-14)


@pytest.mark.parametrize("name", ["matmul", "logsumexp_axis0", "where", "cumsum", "slice_steps",
                                  "rows_and_labels", "pad_edge", "prod_axis1"])
def test_forward_mode_and_both_jacobians_agree_with_the_gradient(name):
    f, args = CASES[name]
    gradient = sd.grad(f)(*args)
    direction = np.random.default_rng(5).normal(size=np.shape(args[0]))
    _, tangent = sd.jvp(f, args, (direction,) + tuple(np.zeros_like(a) for a in args[1:]))
    np.testing.assert_allclose(tangent, np.sum(gradient * direction), rtol=1e-12)
    np.testing.assert_allclose(sd.jacfwd(f)(*args), gradient, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(sd.jacrev(f)(*args), gradient, rtol=1e-12, atol=1e-14)


def test_jacobians_of_array_outputs_and_the_hessian():
    f = lambda a, m: np.tanh(a @ m)  # noqa: E731
    a, m = CASES["matmul"][1]
    reverse, forward = sd.jacrev(f, argnums=1)(a, m), sd.jacfwd(f, argnums=1)(a, m)
    assert reverse.shape == (2, 2, 3, 2)
    h = 1e-6
    for index in np.ndindex(m.shape):
        up, down = m.copy(), m.copy()
        up[index] += h
        down[index] -= h
        column = (f(a, up) - f(a, down)) / (2 * h)
        np.testing.assert_allclose(reverse[(...,) + index], column, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(forward, reverse, rtol=1e-13, atol=1e-15)
    energy = lambda v: np.sum(np.sin(v) * np.exp(-v ** 2)) + np.sum(v[1:] * v[:-1])  # noqa: E731
    v = np.linspace(-1.0, 1.2, 5)
    hessian = sd.hessian(energy)(v)
    d2 = (-np.sin(v) * (1 + 2 * 1 - 4 * v ** 2) - 4 * v * np.cos(v)) * np.exp(-v ** 2)
    expected = np.diag(d2) + np.diag(np.ones(4), 1) + np.diag(np.ones(4), -1)
    # d2/dv2 sin(v) e^{-v^2} = (-sin v (1 + 2 - 4 v^2) - 4 v cos v) e^{-v^2}
    np.testing.assert_allclose(hessian, expected, rtol=1e-12, atol=1e-14)


def test_graph_sizes_do_not_depend_on_the_data_size():
    energy = lambda x: np.sum(np.sin(x) * np.exp(-x ** 2))  # noqa: E731
    sizes = {n: sd.grad(energy).trace(np.zeros(n)).stats()["nodes"] for n in (10, 1000, 10 ** 6)}
    assert len(set(sizes.values())) == 1 and sizes[10] <= 11
    x = np.linspace(-2.0, 2.0, 10 ** 6)
    np.testing.assert_allclose(sd.grad(energy)(x), (np.cos(x) - 2 * x * np.sin(x)) * np.exp(-x ** 2),
                               rtol=1e-12, atol=1e-15)
    mlp_nodes = []
    for width in (4, 64):
        rng = np.random.default_rng(0)
        data = rng.normal(size=(32, 7))

        def loss(p, data=data):
            return np.mean((np.tanh(data @ p["w"] + p["b"]) @ p["v"]) ** 2)

        params = {"w": rng.normal(size=(7, width)), "b": np.zeros(width), "v": rng.normal(size=width)}
        mlp_nodes.append(sd.grad(loss).trace(params).stats()["nodes"])
    assert mlp_nodes[0] == mlp_nodes[1]


def test_zero_dimensional_size_one_and_empty_axes():
    s, one, empty = np.array(0.7), np.ones((1, 3)), np.zeros((0, 3))
    assert float(sd.grad(lambda s: np.sum(s * np.arange(3.0)))(s)) == 3.0
    np.testing.assert_allclose(sd.grad(lambda a: np.sum(np.sin(a) * np.ones((4, 3))))(one),
                               4 * np.cos(one))
    assert sd.grad(lambda e: np.sum(e ** 2))(empty).shape == (0, 3)
    assert float(sd.trace(lambda e: np.sum(e, axis=0), empty)(empty).sum()) == 0.0
    assert sd.trace(lambda e: np.sum(e, axis=0), empty)(empty).shape == (3,)
    with pytest.raises(sd.TracingError, match="empty"):
        sd.trace(lambda e: np.max(e, axis=0), empty)


def test_element_level_code_and_whole_arrays_mix():
    def f(x):
        out = snp.zeros(3)          # filled element by element, then used whole
        out[0] = x[0] * x[1]
        out[2] = np.sin(x[2])
        return np.sum(out * x) + x[1] ** 3

    x = np.array([0.5, -1.0, 2.0])
    expected = np.array([2 * x[0] * x[1], x[0] ** 2 + 3 * x[1] ** 2, np.sin(x[2]) + x[2] * np.cos(x[2])])
    np.testing.assert_allclose(sd.grad(f)(x), expected, rtol=1e-14)
    y = x.copy()

    def g(x):
        z = x.at[1].set(x[0] ** 2)  # a scatter on a whole array; x is unchanged
        z = z.at[np.array([0, 0])].add(1.0)
        return np.sum(z * x)

    # z = [x0 + 2, x0**2, x2]: g = (x0 + 2) x0 + x0**2 x1 + x2**2
    np.testing.assert_allclose(sd.grad(g)(y), [2 * y[0] + 2 + 2 * y[0] * y[1], y[0] ** 2, 2 * y[2]],
                               rtol=1e-14)

    def assign(x):
        y = x.copy()
        y[1:] = y[1:] * 3.0
        return np.sum(y ** 2)

    np.testing.assert_allclose(sd.grad(assign)(x), [2 * x[0], 18 * x[1], 18 * x[2]], rtol=1e-14)


def test_vmap_inside_a_trace_records_the_function_once():
    rng = np.random.default_rng(2)
    points, w = rng.normal(size=(50, 3)), rng.normal(size=(3, 4))
    f = lambda x, w: np.sum(np.tanh(x @ w) ** 2)  # noqa: E731

    def loss(w):
        return np.mean(sd.vmap(f, in_axes=(0, None))(points, w))

    G = sd.grad(loss).trace(w)
    expected = sum(sd.grad(f, argnums=1)(x, w) for x in points) / len(points)
    np.testing.assert_allclose(G(w), expected, rtol=1e-12)
    assert G.stats()["nodes"] < 20  # one copy of f's graph for 50 points


def test_bad_shapes_and_subscripts_name_the_operation_and_the_fix():
    with pytest.raises(sd.TracingError) as info:
        sd.trace(lambda a, b: a + b, np.zeros((2, 3)), np.zeros(4))
    assert "(2, 3)" in info.value.args[0] and "(4,)" in info.value.args[0] and "add" in info.value.args[0]
    assert "<lambda>" in info.value.args[0]
    with pytest.raises(sd.TracingError, match="do not align"):
        sd.trace(lambda a, b: a @ b, np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(sd.TracingError, match="einsum"):
        sd.trace(lambda a: snp.einsum("ij,j", a), np.zeros((2, 3)))
    with pytest.raises(sd.TracingError, match="index 3 has sizes|sizes 3 and 2"):
        sd.trace(lambda a, b: snp.einsum("ij,kj->ik", a, b), np.zeros((2, 3)), np.zeros((2, 2)))
    with pytest.raises(sd.TracingError, match="out of bounds"):
        sd.trace(lambda a: a[5], np.zeros(3))
    # The same index in an update names what the function does with it.
    with pytest.raises(sd.TracingError, match="'<lambda>' adds into .* at 7: .*out of bounds"):
        sd.trace(lambda a: a.at[7].add(1.0), np.zeros(3))
    with pytest.raises(sd.TracingError, match="'<lambda>' assigns into .* at 7: .*out of bounds"):
        sd.trace(lambda a: a.at[7].set(1.0), np.zeros(3))
    with pytest.raises(sd.TracingError, match="index"):
        sd.trace(lambda a: a[np.array([0, 7])], np.zeros(3))


OPERATIONS = {
    "sin": lambda a: np.sin(a),
    "square": lambda a: a * a,
    "sum0": lambda a: np.sum(a, axis=0, keepdims=True) * a,
    "max1": lambda a: np.max(a, axis=1, keepdims=True) - a,
    "transpose": lambda a: (a.T @ a)[: a.shape[0], : a.shape[1]] if a.shape[0] <= a.shape[1] else a,
    "roll": lambda a: np.roll(a, 1, axis=1),
    "flip": lambda a: a[::-1],
    "cumsum": lambda a: np.cumsum(a, axis=0),
    "where": lambda a: np.where(a > 0, a, 0.5 * a),
    "exp_norm": lambda a: np.exp(a - snp.logsumexp(a, axis=1, keepdims=True)),
}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(sorted(OPERATIONS)), min_size=1, max_size=5),
       st.integers(min_value=1, max_value=3), st.integers(min_value=1, max_value=3),
       st.integers(min_value=0, max_value=2 ** 31))
def test_random_array_programs_agree_with_their_per_element_versions(names, rows, columns, seed):
    def program(a):
        for name in names:
            a = OPERATIONS[name](a)
        return np.sum(a * np.arange(a.size).reshape(a.shape) / a.size)

    a = np.random.default_rng(seed).normal(size=(rows, columns))
    whole = sd.trace(program, a)
    elements = whole.expand()
    np.testing.assert_allclose(whole(a), elements(a), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(sd.grad(whole)(a), sd.grad(elements)(a), rtol=1e-10, atol=1e-12)


def test_taylor_mode_through_array_operations_matches_sympy():
    # n-th derivatives and Taylor maps of scalar functions that work on arrays inside:
    # sums, contractions, a cumulative sum with a slice, max (locally a selection) and
    # logsumexp (the chain rule through its softmax weights).
    import sympy

    c = np.arange(1.0, 4.0)

    def f(x):
        scaled = x * c
        return (np.sum(np.sin(scaled)) + np.max(scaled) + snp.logsumexp(scaled)
                + np.ones(3) @ np.outer(c, c) @ scaled + np.sum(np.cumsum(scaled)[::2] ** 2))

    x = sympy.Symbol("x")
    totals = np.cumsum(c)
    exact = (sum(sympy.sin(x * int(k)) for k in c) + 3 * x
             + sympy.log(sum(sympy.exp(x * int(k)) for k in c))
             + x * int(np.sum(np.outer(c, c).sum(axis=0) * c))
             + sum((x * int(totals[i])) ** 2 for i in (0, 2)))
    for order in (1, 2, 5, 12):
        want = float(sympy.diff(exact, x, order).subs(x, sympy.Rational(1, 2)).evalf(30))
        assert float(sd.derivative(f, order)(0.5)) == pytest.approx(want, rel=1e-13)
    points = np.array([0.1, 0.5])
    expected = [float(sympy.diff(exact, x, 3).subs(x, sympy.Rational(p).limit_denominator(10)).evalf(30))
                for p in points]
    np.testing.assert_allclose(sd.derivative(f, 3)(points), expected, rtol=1e-13)
    y = sympy.Symbol("y")
    two = sum(sympy.exp(x * int(k) + y) for k in c)
    coefficients = sd.taylor(lambda a, b: np.sum(np.exp(a * c + b)), 3, argnum=(0, 1))(0.1, 0.2)
    for (i, j), value in coefficients.items():
        want = sympy.diff(two, x, i, y, j).subs({x: sympy.Rational(1, 10), y: sympy.Rational(1, 5)})
        assert float(value) == pytest.approx(float(want / (sympy.factorial(i) * sympy.factorial(j))), rel=1e-13)


# ---------------------------------------------------------------------------
# Large intermediates in buffers kept between calls (symad.array_runtime.rt_buffer)
# ---------------------------------------------------------------------------


def _grid_energy(u):
    return (np.sum((u[1:, :] - u[:-1, :]) ** 2) + np.sum((u[:, 1:] - u[:, :-1]) ** 2)
            + np.sum((u ** 2 - 1) ** 2))


def _grid_gradient(u):
    """The analytic gradient of _grid_energy."""
    gradient = 4 * u * (u ** 2 - 1)
    rows, columns = u[1:, :] - u[:-1, :], u[:, 1:] - u[:, :-1]
    gradient[1:, :] += 2 * rows
    gradient[:-1, :] -= 2 * rows
    gradient[:, 1:] += 2 * columns
    gradient[:, :-1] -= 2 * columns
    return gradient


@pytest.mark.parametrize("backend", ["numexpr", "numpy"])
def test_pooled_buffers_never_reach_the_caller_or_a_later_read(backend):
    # 256x256 values are past symad.array_runtime.RT_POOL_MIN_ELEMENTS: the module writes
    # them into pooled buffers. A result kept from one call must not change in the next,
    # and every released buffer is read by no later line.
    import re

    rng = np.random.default_rng(3)
    u, w = rng.normal(size=(256, 256)), rng.normal(size=(256, 256))
    value_and_gradient = sd.value_and_grad(_grid_energy).trace(u)
    source = value_and_gradient.source(backend)
    assert "out=rt_buffer(DTYPE" in source and "rt_release(" in source
    body = source[source.index("def run("):].splitlines()
    for position, line in enumerate(body):
        if line.strip().startswith("rt_release("):
            released = re.findall(r"v\d+", line)
            later = "\n".join(body[position + 1:])
            assert not any(re.search(rf"\b{name}\b", later) for name in released), line
    evaluate = value_and_gradient.compile(backend)
    first_value, first_gradient = evaluate(u)
    kept = first_gradient.copy()
    for _ in range(3):
        value, gradient = evaluate(w)
    np.testing.assert_array_equal(first_gradient, kept)
    np.testing.assert_allclose(kept, _grid_gradient(u), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gradient, _grid_gradient(w), rtol=1e-12, atol=1e-12)
    assert value == pytest.approx(_grid_energy(w), rel=1e-12)


@pytest.mark.parametrize("backend", ["numexpr", "numpy"])
def test_a_view_of_a_pooled_value_keeps_its_buffer(backend):
    # t is used twice (so it is written, into a pooled buffer); the outputs are a strided
    # view of it and a product of two shifted views: none may be overwritten by a later call.
    def f(x):
        t = np.sin(x) * x + 1.0
        return t[::2], t[1:] * t[:-1]

    rng = np.random.default_rng(4)
    x, y = rng.normal(size=1 << 15), rng.normal(size=1 << 15)
    F = sd.trace(f, x)
    evaluate = F.compile(backend)
    every_other, products = evaluate(x)
    kept = every_other.copy(), products.copy()
    evaluate(y)
    t = np.sin(x) * x + 1.0
    np.testing.assert_array_equal(every_other, kept[0])
    np.testing.assert_array_equal(products, kept[1])
    np.testing.assert_allclose(every_other, t[::2], rtol=1e-15)
    np.testing.assert_allclose(products, t[1:] * t[:-1], rtol=1e-15)


def test_pooled_buffers_are_per_thread():
    # Chunks of one evaluation may run on several threads: each takes its own buffers.
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(5)
    grids = [rng.normal(size=(256, 256)) for _ in range(8)]
    gradient = sd.grad(_grid_energy).trace(grids[0])
    evaluate = gradient.compile("numpy")
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda u: [evaluate(u) for _ in range(5)], grids))
    for u, calls in zip(grids, results):
        for result in calls:
            np.testing.assert_allclose(result, _grid_gradient(u), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", ["numexpr", "numpy"])
def test_the_callers_array_is_never_written_in_place(backend):
    # stop_gradient(x) is x itself: the cotangent sum that starts from it must not add into
    # the caller's array (it did, for a sum whose other term was a slice's cotangent).
    def f(x):
        return np.sum(sd.stop_gradient(x) * x) + np.sum(x[1:] ** 2)

    x = np.linspace(0.0, 1.0, 1 << 15)
    kept = x.copy()
    gradient = sd.grad(f).trace(x).compile(backend)(x)
    np.testing.assert_array_equal(x, kept)
    want = kept.copy()
    want[1:] += 2 * kept[1:]
    np.testing.assert_allclose(gradient, want, rtol=1e-15)
    assert not np.shares_memory(gradient, x)


@pytest.mark.parametrize("backend", ["numexpr", "numpy"])
def test_pools_keep_only_what_recent_calls_used(backend):
    # Forty batch sizes: the pool keeps the buffers of the last calls' shapes, not all forty.
    n = 1 << 14
    rng = np.random.default_rng(2)

    def f(x):
        t = np.sin(x) * x + x * x
        return np.sum(t[1:] * t[:-1]) + np.sum(np.exp(-t ** 2))

    F = sd.grad(f).trace(rng.normal(size=n))
    evaluate = F.compile(backend)
    for points in range(1, 41):
        xs = rng.normal(size=(points, n))
        gradients = evaluate(xs)
    np.testing.assert_allclose(gradients[-1], sd.grad(f)(xs[-1]), rtol=1e-13)
    pool = F.evaluator(backend, np.float64).run.__globals__["RT_POOL"].free
    batch_sizes = {shape[0] for shape, _ in pool}
    assert batch_sizes <= {38, 39, 40}  # this call's, and the two before it (RT_POOL_CALLS)
    assert sum(b.nbytes for buffers in pool.values() for b in buffers) < 10 * 3 * 40 * n * 8


@pytest.mark.parametrize("subscripts, a_core, b_core", [
    ("j,k->jk", (8,), (32,)),          # an outer product: a broadcast multiplication
    (",j->j", (), (5,)),
    ("j,jk->k", (8,), (8, 32)),        # one matrix on the right: one folded BLAS product
    ("ij,jk->ik", (3, 8), (8, 4)),
    ("ij,kj->ki", (3, 8), (4, 8)),
    ("j,j->", (6,), (6,)),
    ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),  # a batch index: matmul's own batching
])
@pytest.mark.parametrize("lead_a, lead_b", [((), ()), ((7,), (1,)), ((7,), ()), ((1,), (7,)),
                                            ((7,), (7,)), ((), (1, 1)), ((2, 3), (1,))])
@pytest.mark.parametrize("pooled", [False, True])
def test_einsum_runtime_matches_numpy_for_every_lead(subscripts, a_core, b_core, lead_a, lead_b,
                                                     pooled, monkeypatch):
    # rt_einsum takes leading (batch) dimensions in front of each operand's core and
    # broadcasts them; its three routes must agree with np.einsum on each. Pooled (every
    # size pooled here, and multiplications through numexpr, as a numexpr module's large
    # intermediates are), a result comes from the pool and goes back under its own shape.
    import numexpr

    from symad import array_runtime as R

    if pooled:
        monkeypatch.setattr(R, "RT_POOL_MIN_ELEMENTS", 1)
        monkeypatch.setattr(R, "RT_NUMEXPR", numexpr)
        monkeypatch.setattr(R, "RT_NUMEXPR_MIN_ELEMENTS", 1)
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=lead_a + a_core), rng.normal(size=lead_b + b_core)
    got = R.rt_einsum(a, b, subscripts, pooled=pooled)
    lead = np.broadcast_shapes(lead_a, lead_b)
    inputs, out = subscripts.split("->")
    sa, sb = inputs.split(",")
    want = np.einsum(f"...{sa},...{sb}->...{out}", a, b)
    assert got.shape == lead + want.shape[len(want.shape) - len(out):]
    np.testing.assert_allclose(got, np.broadcast_to(want, got.shape), rtol=1e-13, atol=1e-13)
    if pooled and sa + sb != "ijkj":  # (ij,kj->ki comes out transposed: a new array)
        R.rt_release(got)
        again = R.rt_einsum(a, b, subscripts, pooled=True)
        assert np.shares_memory(again, got)  # the released buffer, taken again
        np.testing.assert_allclose(again, np.broadcast_to(want, got.shape), rtol=1e-13, atol=1e-13)


def test_sech_in_one_buffer_is_numpys_one_over_cosh():
    from symad.array_runtime import rt_sech

    x = np.linspace(-30.0, 30.0, 1001)
    out = np.empty_like(x)
    assert rt_sech(x, out=out) is out
    np.testing.assert_array_equal(out, 1.0 / np.cosh(x))


def _mlp_per_sample_gradients(params, x, y):
    """The per-sample gradients of (tanh(x @ w1 + b1) @ w2 + b2 - y)**2, written out by hand."""
    h = np.tanh(x @ params["w1"] + params["b1"])
    residual = 2.0 * (h @ params["w2"] + params["b2"] - y)
    hidden = residual[:, None] * params["w2"] * (1.0 - h ** 2)
    return {"b1": hidden, "b2": residual, "w1": x[:, :, None] * hidden[:, None, :],
            "w2": residual[:, None] * h}


@pytest.mark.parametrize("backend", ["numexpr", "numpy", pytest.param("numba", marks=pytest.mark.skipif(
    not numba_available(), reason="numba is not installed (pip install symad[fast])"))])
def test_per_sample_mlp_gradients_whole_and_in_blocks(backend):
    # The per-sample gradient of an 8-32-1 MLP's squared error (benchmarks/eval.py's "mlp"
    # case) at 3,000 samples: its hidden values are pooled buffers, its 3000 x 8 x 32 weight
    # gradient a multiplication large enough for numexpr's threads. In blocks, each block's
    # results are written into arrays of the whole batch; a result that is the same at every
    # sample (the constant's gradient) is one broadcast row.
    rng = np.random.default_rng(11)
    params = {"w1": rng.normal(size=(8, 32)) / 3, "b1": rng.normal(size=32) / 3,
              "w2": rng.normal(size=32) / 6, "b2": np.array(0.1)}
    x, y = rng.normal(size=(3000, 8)), rng.normal(size=3000)

    def loss(p, x, y):
        return (np.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"] - y) ** 2 + 0.5 * p["b2"]

    F = sd.grad(loss).trace(params, np.zeros(8), 0.0)
    want = _mlp_per_sample_gradients(params, x, y)
    want["b2"] = want["b2"] + 0.5
    # The blocks are sized by the intermediates alone: the results (321 numbers a sample)
    # and the inputs exist whole anyway.
    module = F.evaluator(backend, np.float64).module
    assert module.bytes_per_point < 321 * 8
    for block_size in (None, 1000, 7):
        got = F.compile(backend, block_size=block_size)(params, x, y)
        for name in want:
            assert got[name].shape == (3000,) + np.shape(params[name])
            np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-14)
    F0 = sd.trace(lambda w, x: (np.tanh(x @ w), np.sin(w)), params["w1"], np.zeros(8))
    for block_size in (None, 7):
        hidden, constant = F0.compile(backend, block_size=block_size)(params["w1"], x)
        np.testing.assert_allclose(hidden, np.tanh(x @ params["w1"]), rtol=1e-13, atol=1e-15)
        assert constant.shape == (3000, 8, 32)
        np.testing.assert_array_equal(constant, np.broadcast_to(np.sin(params["w1"]), (3000, 8, 32)))


def test_a_long_loop_over_arrays_holds_only_its_live_values():
    # 100 steps over 2^16 elements: each step's intermediates die at the next (pooled
    # buffers go back, other values are deleted after their last read), so one call's
    # peak is a few arrays, not one per step (it was 100: 52 MB).
    import tracemalloc

    def f(x):
        for _ in range(100):
            x = x + 0.01 * np.sin(x) * np.roll(x, 1)
        return x

    x = np.random.default_rng(8).normal(size=1 << 16)
    want = x.copy()
    for _ in range(100):
        want = want + 0.01 * np.sin(want) * np.roll(want, 1)
    evaluate = sd.trace(f, x).compile("numexpr")
    evaluate(x)
    tracemalloc.start()
    try:
        got = evaluate(x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert peak < 12 * x.nbytes
    # ... and a batch of such points is cut into blocks by that peak, not by the sum of
    # every value (which would make the blocks a hundred times smaller).
    module = sd.trace(f, x).evaluator("numexpr", np.float64).module
    assert module.bytes_per_point < 12 * x.nbytes


@pytest.mark.parametrize("backend", ["numexpr", "numpy"])
@pytest.mark.parametrize("n", [10, 1 << 15])
def test_a_negated_fused_value_added_into_a_slice(backend, n):
    # The cotangent of cos(u[::2]) is -sin(u[::2]) placed into every other element; added
    # to 2u it is subtracted there, and the sine fused into the negation must still be
    # written (the numexpr backend raised "the graph reads _n6" for these).
    u = np.linspace(0.1, 1.0, n)
    cases = [
        (lambda u: np.sum(u ** 2) + np.sum(np.cos(u[::2])), lambda u: 2 * u - _placed(np.sin(u[::2]), n, slice(None, None, 2))),
        (lambda u: np.sum(u ** 2) + np.sum(np.cos(u[1:])), lambda u: 2 * u - _placed(np.sin(u[1:]), n, slice(1, None))),
        (lambda u: np.sum(u ** 2) - np.sum(u[::2] ** 2), lambda u: 2 * u - _placed(2 * u[::2], n, slice(None, None, 2))),
    ]
    for f, gradient in cases:
        np.testing.assert_allclose(sd.grad(f).trace(u).compile(backend)(u), gradient(u), rtol=1e-14)


def _placed(values, n, where):
    out = np.zeros(n)
    out[where] = values
    return out


@pytest.mark.parametrize("backend", ["numexpr", "numpy"])
def test_results_are_writeable_arrays_of_their_own(backend):
    # As NumPy's (and the scalar compiler's) are: g *= lr works, and never writes into an
    # argument, even where the value is an argument (the gradient of sum(x*y) by x is y).
    x, y = np.ones(5), np.arange(5.0)
    G = sd.grad(lambda x, y: np.sum(x * y)).trace(x, y)
    g = G.compile(backend)(x, y)
    assert g.flags.writeable and not np.shares_memory(g, y)
    g *= 2.0
    np.testing.assert_array_equal(y, np.arange(5.0))
    F = sd.trace(lambda x: (np.sum(x ** 2), np.arange(4.0), np.ones(3) * np.sum(x)), x)
    for value in F.compile(backend)(x)[1:]:
        assert value.flags.writeable
    batch = F.compile(backend)(np.ones((3, 5)))  # the constant broadcast to the batch, copied
    assert batch[1].shape == (3, 4) and batch[1].flags.writeable
    batch[1][0, 0] = -1.0
    assert batch[1][1, 0] == 0.0


TERM_OPERATIONS = {
    "cos": np.cos, "sin": np.sin, "negative": lambda a: -a, "square": lambda a: a * a,
    "scale": lambda a: 3.0 * a, "shift": lambda a: a + 1.0, "exp": lambda a: np.exp(-a * a),
}
TERM_SLICES = {"all": slice(None), "even": slice(None, None, 2), "tail": slice(1, None),
               "head": slice(None, -1), "reversed": slice(None, None, -1)}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(TERM_SLICES)),
                          st.lists(st.sampled_from(sorted(TERM_OPERATIONS)), max_size=3),
                          st.sampled_from([1.0, -1.0])), min_size=1, max_size=4),
       st.integers(min_value=0, max_value=2 ** 31))
def test_random_sums_of_terms_on_slices_agree_across_backends_and_elements(terms, seed):
    # Gradients of sums of terms, each a chain of elementwise operations on a slice: the
    # shape whose cotangents the array lowering adds into regions in place (and where a
    # fused negation once lost the value inside it). Small: whole arrays against the
    # per-element version; large (pooled buffers, NumPy and numexpr choices): the
    # numexpr and numpy backends against each other.
    def program(u):
        total = 0.0
        for where, names, sign in terms:
            part = u[TERM_SLICES[where]]
            for name in names:
                part = TERM_OPERATIONS[name](part)
            total = total + sign * np.sum(part)
        return total

    rng = np.random.default_rng(seed)
    small = rng.normal(size=7)
    whole = sd.trace(program, small)
    np.testing.assert_allclose(sd.grad(whole)(small), sd.grad(whole.expand())(small),
                               rtol=1e-10, atol=1e-12)
    large = rng.normal(size=1 << 15)
    G = sd.grad(program).trace(large)
    np.testing.assert_allclose(G.compile("numexpr")(large), G.compile("numpy")(large),
                               rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------
# Transposes of broadcasting: the conditions of symad.rules.transposes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("c, shape", [(C, (2, 3)), (V[None, :], (2, 3)), (S, (2, 3)),
                                      (V[None, :], (4, 1, 3)), (C[None], (2, 2, 3)),
                                      (C[:, :, None], (2, 1, 3))],
                         ids=["column", "row", "0-d", "row-new-axes", "size-1-to-2", "keeps-size-1"])
def test_broadcast_to_sums_the_cotangent_over_every_repeated_axis(c, shape):
    # The transpose of broadcast_to sums over the axes it added in front and over each of
    # the operand's size-1 axes that it stretched -- to 3 or to 2 -- and reshapes the sum back
    # to the operand's shape. A size-1 axis left out of that sum cannot be reshaped back.
    weights = np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape)
    f = lambda c: np.sum(np.sin(np.broadcast_to(c, shape)) * weights)  # noqa: E731
    expected = np.cos(c) * np.sum(weights, axis=tuple(
        i for i, (n, m) in enumerate(zip((1,) * (len(shape) - np.ndim(c)) + np.shape(c), shape))
        if n != m)).reshape(np.shape(c))
    gradient = sd.grad(f)(c)
    assert gradient.shape == np.shape(c)
    np.testing.assert_allclose(gradient, expected, rtol=1e-13)
    np.testing.assert_allclose(gradient, central_differences(f, (c,), 0), rtol=1e-6)


def test_broadcast_to_an_empty_axis_has_a_zero_gradient():
    # A size-1 axis broadcast to size 0 is summed too: over no elements, so the operand's
    # cotangent through it is 0 (np.einsum keeps the empty sum in the graph; np.sum folds it).
    row = V[None, :]
    f = lambda c: np.sum(np.einsum("ij->j", np.sin(np.broadcast_to(c, (0, 3))))) + np.sum(c ** 2)  # noqa: E731
    np.testing.assert_allclose(sd.grad(f)(row), 2 * row, rtol=1e-15)


def test_an_operand_repeated_along_an_empty_axis_gets_no_cotangent_from_it():
    # unbroadcast: where the cotangent is the same along an axis the operand was repeated on
    # (stored with size 1), the operand's cotangent is the axis length times it -- 0 for an
    # empty axis, where only the multiplication by the count makes it 0. d/ds of
    # sum_j sum_{i in {}} (s + e_ij) + s^2 is 2 s.
    f = lambda s, e: np.sum(np.einsum("ij->j", s + e)) + s ** 2  # noqa: E731
    gs, ge = sd.grad(f, argnums=(0, 1))(0.7, np.zeros((0, 3)))
    assert float(gs) == pytest.approx(1.4, rel=1e-15)
    assert ge.shape == (0, 3)
    # Repeat counts above 1 (the docstring's case): s counted once per repeat.
    assert float(sd.grad(lambda s: np.sum(np.ones((2, 3)) + s))(0.7)) == 6.0
    assert float(sd.grad(lambda s: np.sum(np.ones(2) + s))(0.7)) == 2.0


def test_a_jacobian_through_a_broadcast_operand_keeps_its_size_one_axes():
    # jacrev sweeps with seeds in front of the cotangents: unbroadcast sums the column c
    # over the columns of a (removing that axis) and must give the size-1 axis back before
    # the term meets c's other cotangent (from c ** 2), or the two broadcast together.
    g = lambda c, a: np.sum(np.sin(c * a), axis=1, keepdims=True) + c ** 2  # noqa: E731
    jacobian = sd.jacrev(g)(C, A)
    assert jacobian.shape == (2, 1, 2, 1)
    diagonal = np.sum(np.cos(C * A) * A, axis=1) + 2 * C[:, 0]
    np.testing.assert_allclose(jacobian.reshape(2, 2), np.diag(diagonal), rtol=1e-14)
    np.testing.assert_allclose(sd.jacfwd(g)(C, A), jacobian, rtol=1e-14)
    h = 1e-6
    for row in range(2):
        up, down = C.copy(), C.copy()
        up[row, 0] += h
        down[row, 0] -= h
        column = (g(up, A) - g(down, A)) / (2 * h)
        np.testing.assert_allclose(jacobian[:, :, row, 0], column, rtol=1e-6, atol=1e-9)


def test_a_scalar_broadcast_into_a_column_keeps_its_shape_over_a_batch():
    # broadcast_to of a scalar is an array of one repeated scalar atom; its leaf is
    # assembled from elements, and those were stacked as (points, 3) for a (3, 1) output
    # ("operands could not be broadcast together", found by the random programs).
    F = sd.trace(lambda x: np.broadcast_to(np.sum(x), (3, 1)) * 2.0, np.ones(1))
    np.testing.assert_array_equal(F(np.array([0.5])), np.full((3, 1), 1.0))
    batch = F(np.arange(4.0).reshape(4, 1))
    assert batch.shape == (4, 3, 1)
    np.testing.assert_array_equal(batch, 2.0 * np.arange(4.0)[:, None, None] * np.ones((4, 3, 1)))
    np.testing.assert_array_equal(sd.grad(lambda x: np.sum(np.broadcast_to(np.sum(x), (3, 1))))(
        np.array([0.5])), [3.0])


def test_a_concatenation_of_empty_pieces_differentiates():
    # Pieces empty along the joining axis are dropped; when all are, one is kept, and the
    # concatenation node has a single operand (np.einsum keeps its empty sum in the graph).
    f = lambda x: np.sum(x ** 2) + np.einsum("i->", np.concatenate([x[:0], x[3:]]))  # noqa: E731
    gradient = sd.grad(f)(V)
    np.testing.assert_allclose(gradient, 2 * V, rtol=1e-15)
    np.testing.assert_allclose(gradient, central_differences(f, (V,), 0), rtol=1e-6)


def test_a_value_set_into_a_column_gets_its_own_rows_cotangent():
    # x.at[:, 0].set(v) for x of shape (2, 1): v's cotangent is the cotangent at the column,
    # of v's shape (2,). Summed down to x's shape instead, the two rows would be added
    # together (the column's (2,) against x's trailing axis of size 1).
    weights = np.array([[1.0], [2.0]])
    f = lambda x, v: np.sum(np.sin(x.at[:, 0].set(v)) * weights)  # noqa: E731
    x, v = np.array([[0.1], [0.2]]), np.array([0.3, -0.4])
    gx, gv = sd.grad(f, argnums=(0, 1))(x, v)
    np.testing.assert_allclose(gv, np.cos(v) * weights[:, 0], rtol=1e-15)
    np.testing.assert_array_equal(gx, np.zeros((2, 1)))

    def with_numpy(x, v):  # the same function on NumPy arrays, which have no .at
        x = x.copy()
        x[:, 0] = v
        return np.sum(np.sin(x) * weights)

    np.testing.assert_allclose(gv, central_differences(with_numpy, (x, v), 1), rtol=1e-6)


@pytest.mark.parametrize("backend", ["numexpr", "numpy", "numba"])
def test_a_sum_of_a_total_and_a_slices_cotangent_over_a_batch(backend):
    # The gradient of sum(x[None] / (c x)) adds a total (shape ()) and a slice's cotangent
    # (shape (1,)); written in place into the total, the batch's points axis met the
    # slice's axis and (2,) + (2, 1) made (2, 2) (found by the random programs).
    if backend not in sd.available_backends():
        pytest.skip(f"{backend} is not installed")
    G = sd.grad(lambda x: np.sum(x[None] / (2.0 * x)) + np.sum(x[None] ** 2)).trace(np.array([0.5]))
    points = np.array([[0.5], [0.7], [-1.5]])
    np.testing.assert_allclose(G.compile(backend)(points), 2 * points, rtol=1e-14)


def test_an_operand_with_an_empty_leading_axis_keeps_its_shape_in_reverse_mode():
    # x (0, 1) repeated along the columns of y (0, 3): its cotangent is summed over them,
    # (0, 3) to (0,), and reshaped to (0, 1). Shapes are compared up to leading size-1 axes
    # (what broadcasting adds), never up to leading empty ones: (0,) is not the shape ().
    f = lambda x, y: np.einsum("ij->", np.sin(x + y))  # noqa: E731
    gx, gy = sd.grad(f, argnums=(0, 1))(np.zeros((0, 1)), np.zeros((0, 3)))
    assert gx.shape == (0, 1) and gy.shape == (0, 3)


def test_the_formula_of_a_max_gradient_shares_it_by_an_indicator_of_the_ties():
    # JAX's convention at ties, as the formula shows it: the indicator of the elements equal
    # to the maximum (1 or 0) over the number of them.
    x = np.array([0.3, 1.2, 1.2])
    G = sd.grad(lambda x: np.max(x) * 2.0).trace(x)
    np.testing.assert_array_equal(G(x), [0.0, 1.0, 1.0])
    formula = G.formula()
    branches = {piece.expr for p in formula.atoms(sympy.Piecewise) for piece in p.args}
    assert branches == {0, 1}, formula
