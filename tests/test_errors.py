"""Errors (SPEC §5): the right class, and a message naming the user's function and the culprit."""

import numpy as np
import pytest
import sympy

import symad as sd
import symad.numpy as snp  # noqa: F401  (the namespace the messages point to)

# ---------------------------------------------------------------------------
# The hierarchy
# ---------------------------------------------------------------------------


def test_error_hierarchy():
    assert issubclass(sd.SymadError, Exception)
    assert issubclass(sd.TracingError, sd.SymadError)
    assert issubclass(sd.TracingError, TypeError)
    assert issubclass(sd.CompileError, sd.SymadError)
    assert issubclass(sd.CompileError, RuntimeError)
    assert issubclass(sd.DifferentiationError, sd.SymadError)
    assert issubclass(sd.DifferentiationError, (TypeError, ValueError))


# ---------------------------------------------------------------------------
# Python control flow on traced values
# ---------------------------------------------------------------------------


def relu_branch(x):
    if x > 0:
        return x
    return -x


def halving_loop(x):
    while x > 1.0:
        x = x / 2
    return x


@pytest.mark.parametrize(
    "call",
    [
        lambda: sd.trace(relu_branch, 1.0),
        lambda: sd.grad(relu_branch)(1.0),
        lambda: sd.grad(relu_branch)(np.float64(-2.0)),
    ],
    ids=["trace", "grad", "grad-negative"],
)
def test_python_if_on_traced_value(call):
    with pytest.raises(sd.TracingError) as info:
        call()
    assert isinstance(info.value, TypeError)
    msg = str(info.value)
    assert "relu_branch" in msg
    assert "where" in msg


def test_python_while_on_traced_value():
    with pytest.raises(sd.TracingError) as info:
        sd.grad(halving_loop)(5.0)
    msg = str(info.value)
    assert "halving_loop" in msg
    assert "where" in msg


# ---------------------------------------------------------------------------
# Unsupported NumPy functions
# ---------------------------------------------------------------------------


def spectrum_loss(x):
    return np.sum(np.fft.hfft(x))  # np.fft.fft is traced; the Hermitian transform is not


def conditioned_loss(a):
    return np.linalg.cond(a)  # np.linalg.eig is traced; the condition number is not


def histogram_loss(x):
    return np.sum(np.histogram(x)[0] * x)


@pytest.mark.parametrize(
    "fun, arg, numpy_name",
    [
        (spectrum_loss, np.array([1.0, 2.0, 3.0]), "hfft"),
        (conditioned_loss, np.array([[2.0, 1.0], [1.0, 3.0]]), "cond"),
        (histogram_loss, np.array([3.0, 1.0, 2.0]), "histogram"),
    ],
    ids=["fft", "cond", "histogram"],
)
def test_unsupported_numpy_function(fun, arg, numpy_name):
    with pytest.raises(sd.TracingError) as info:
        sd.grad(fun)(arg)
    assert isinstance(info.value, TypeError)
    msg = str(info.value)
    assert numpy_name in msg
    assert fun.__name__ in msg


# ---------------------------------------------------------------------------
# Arguments too large to trace symbolically
# ---------------------------------------------------------------------------


def big_sum(signal):
    return np.sum(signal)


def test_a_large_argument_is_one_array_input():
    # 200,000 elements: one input and one node, no limit (whole-array operations).
    F = sd.trace(big_sum, np.zeros(200_000))
    assert F.stats()["nodes"] == 1 and F.stats()["inputs"] == 1
    assert np.all(sd.grad(big_sum)(np.zeros(200_000)) == 1.0)


def loop_sum(signal):
    total = 0.0
    for value in signal:  # element by element: bounded by MAX_SYMBOLIC_ELEMENTS
        total = total + value
    return total


@pytest.mark.parametrize("call", [lambda: sd.trace(loop_sum, np.zeros(200_000)),
                                  lambda: sd.grad(loop_sum)(np.zeros(200_000)),
                                  lambda: sd.trace(big_sum, np.zeros(200_000)).expand()],
                         ids=["trace", "grad", "expand"])
def test_reading_a_large_argument_element_by_element_is_refused(call):
    with pytest.raises(sd.TracingError) as info:
        call()
    msg = str(info.value)
    assert "whole-array operations" in msg and "MAX_SYMBOLIC_ELEMENTS = 200000" in msg
    assert "loop_sum" in msg or "big_sum" in msg


# ---------------------------------------------------------------------------
# Bad argnums
# ---------------------------------------------------------------------------


def bilinear(a, b):
    return a * b


@pytest.mark.parametrize(
    "argnums, culprit",
    [
        ((0, 0), "entry 0 appears twice"),
        ((1, 1), "entry 1 appears twice"),
        ("alpha", "entry 'alpha' is not an integer"),
        ((0, "alpha"), "entry 'alpha' is not an integer"),
        (1.5, "entry 1.5 is not an integer"),
        ((0, 1.5), "entry 1.5 is not an integer"),
        (5, "entry 5 is out of range"),
        ((0, 5), "entry 5 is out of range"),
        (-3, "entry -3 is out of range"),
        ((1, -3), "entry -3 is out of range"),
    ],
    ids=[
        "dup0",
        "dup1",
        "str",
        "str-in-tuple",
        "float",
        "float-in-tuple",
        "out-of-range",
        "out-of-range-in-tuple",
        "negative-out-of-range",
        "negative-out-of-range-in-tuple",
    ],
)
@pytest.mark.parametrize("transform", [sd.grad, sd.value_and_grad], ids=["grad", "vag"])
def test_bad_argnums(transform, argnums, culprit):
    with pytest.raises(ValueError) as info:
        transform(bilinear, argnums=argnums)(2.0, 3.0)
    assert isinstance(info.value, sd.SymadError)
    msg = str(info.value)
    assert culprit in msg
    assert "bilinear" in msg


# Every boundary of the range check, for every transform that takes argument positions.
# Off by one at the top, ``argnums=n`` would wrap round to argument 0 (``n % n``) and
# silently differentiate with respect to the wrong argument; at the bottom, ``-n - 1``
# would wrap round to the last one. A check off by one the other way refuses ``n - 1``
# or ``-n``, which are valid.


def one_argument(x):
    return x ** 3


def two_arguments(x, y):
    return x ** 3 * y + y ** 2


def three_arguments(x, y, z):
    return x * y * z + z ** 3


FUNCTIONS_BY_COUNT = {1: one_argument, 2: two_arguments, 3: three_arguments}

#: transform name -> (make the transform from (fun, positions), whether it takes a tuple)
POSITION_TRANSFORMS = {
    "grad": (lambda f, p: sd.grad(f, argnums=p), True),
    "value_and_grad": (lambda f, p: sd.value_and_grad(f, argnums=p), True),
    "jacfwd": (lambda f, p: sd.jacfwd(f, argnums=p), True),
    "jacrev": (lambda f, p: sd.jacrev(f, argnums=p), True),
    "jacobian": (lambda f, p: sd.jacobian(f, argnums=p), True),
    "hessian": (lambda f, p: sd.hessian(f, argnums=p), True),
    "jacobian-sparse": (lambda f, p: sd.jacobian(f, argnums=p, sparse=True), False),
    "hessian-sparse": (lambda f, p: sd.hessian(f, argnums=p, sparse=True), False),
    "derivative": (lambda f, p: sd.derivative(f, 2, argnum=p), False),
    "taylor": (lambda f, p: sd.taylor(f, 2, argnum=p), True),
}


def _out_of_range_cases():
    """(transform, count, argnums, the bad entry) for every boundary, n and -n - 1, alone and
    (where the transform takes several positions) in tuples."""
    for transform, (_, takes_tuples) in POSITION_TRANSFORMS.items():
        for count in FUNCTIONS_BY_COUNT:
            for bad in (count, -count - 1):
                forms = [bad, (bad,), (0, bad), (bad, count - 1)] if takes_tuples else [bad]
                for argnums in forms:
                    yield pytest.param(transform, count, argnums, bad,
                                       id=f"{transform}-n{count}-{argnums}")


@pytest.mark.parametrize("transform, count, argnums, bad", list(_out_of_range_cases()))
def test_every_out_of_range_argnums_boundary_is_refused_naming_the_entry(transform, count,
                                                                        argnums, bad):
    make, _ = POSITION_TRANSFORMS[transform]
    fun = FUNCTIONS_BY_COUNT[count]
    args = (0.5,) * count
    with pytest.raises(ValueError) as info:
        make(fun, argnums)(*args)
    assert isinstance(info.value, sd.SymadError)
    message = str(info.value)
    assert f"entry {bad} is out of range" in message, message
    assert f"{count} positional argument" in message and fun.__name__ in message


@pytest.mark.parametrize("transform", POSITION_TRANSFORMS)
@pytest.mark.parametrize("count", FUNCTIONS_BY_COUNT)
def test_the_in_range_boundaries_of_argnums_are_accepted(transform, count):
    # n - 1 and -n are the last and the first argument: the check must let them through.
    make, takes_tuples = POSITION_TRANSFORMS[transform]
    fun = FUNCTIONS_BY_COUNT[count]
    args = (0.5,) * count
    for good in (count - 1, -count):
        make(fun, good)(*args)
        if takes_tuples:
            make(fun, (good,))(*args)


@pytest.mark.parametrize("transform", [sd.grad, sd.value_and_grad], ids=["grad", "vag"])
def test_argnums_none_without_weights(transform):
    with pytest.raises(ValueError) as info:
        transform(bilinear, argnums=None)(2.0, 3.0)
    assert isinstance(info.value, sd.SymadError)
    msg = str(info.value)
    assert "weights" in msg
    assert "bilinear" in msg


# ---------------------------------------------------------------------------
# Integer inputs (a TypeError, as in JAX) — the message names function and argument
# ---------------------------------------------------------------------------


def scaled_log(count, rate):
    return np.log(count) * rate


def test_integer_input_message():
    with pytest.raises(TypeError) as info:
        sd.grad(scaled_log)(2, 5.0)
    msg = str(info.value)
    assert "scaled_log" in msg
    assert "count" in msg


# ---------------------------------------------------------------------------
# A list (or tuple) as an argument: a pytree, as in JAX
# ---------------------------------------------------------------------------
# sd.grad(f)([0.1, 0.2]) differentiates with respect to each item and returns a list,
# as jax.grad does; array arithmetic on the list (u ** 2) is then Python's TypeError
# (JAX's too), which symad explains: the function, the argument, np.asarray(u).


def sum_of_squares(u):
    return np.sum(u ** 2)


def numpy_sum(u):
    return np.sum(u)  # NumPy makes an array of the list's traced items: also explained


def scaled(u):
    return u * 2.5  # list * float: "can't multiply sequence by non-int of type 'float'"


LIST_TRANSFORMS = {
    "grad": lambda f, a: sd.grad(f)(a),
    "jacobian": lambda f, a: sd.jacobian(f)(a),
    "jacfwd": lambda f, a: sd.jacfwd(f)(a),
    "value_and_grad": lambda f, a: sd.value_and_grad(f)(a),
    "hessian": lambda f, a: sd.hessian(f)(a),
    "trace": lambda f, a: sd.trace(f, a),
}


@pytest.mark.parametrize("container", [[0.1, 0.2], (0.1, 0.2)], ids=["list", "tuple"])
@pytest.mark.parametrize("fun", [sum_of_squares, numpy_sum, scaled], ids=lambda f: f.__name__)
@pytest.mark.parametrize("transform", LIST_TRANSFORMS)
def test_array_arithmetic_on_a_list_argument_names_function_argument_and_fix(transform, fun,
                                                                            container):
    with pytest.raises(TypeError) as info:
        LIST_TRANSFORMS[transform](fun, container)
    assert isinstance(info.value, sd.TracingError)
    message = str(info.value)
    kind = type(container).__name__
    assert f"function {fun.__name__!r}" in message
    assert f"argument 'u' was passed as a {kind} of 2 items" in message
    assert "pytrees, as JAX does" in message and f"its derivative is a {kind} too" in message
    assert f"np.asarray(u) in place of the {kind}" in message and "snp.asarray(u)" in message


def test_a_list_nested_in_an_argument_is_named_by_its_path():
    with pytest.raises(sd.TracingError) as info:
        sd.grad(lambda params: np.sum(params["w"] ** 2))({"w": [1.0, 2.0]})
    assert "params['w'] (in argument 'params') was passed as a list of 2 items" in str(info.value)


def test_a_list_argument_is_a_pytree_and_the_suggested_fixes_work():
    gradient = sd.grad(lambda u: u[0] ** 2 + 3 * u[1])([0.1, 0.2])  # as jax.grad: a list
    assert isinstance(gradient, list) and np.allclose(gradient, [0.2, 3.0])
    np.testing.assert_allclose(sd.grad(sum_of_squares)(np.asarray([0.1, 0.2])), [0.2, 0.4])
    kept = sd.grad(lambda u: np.sum(snp.asarray(u) ** 2))([0.1, 0.2])
    assert isinstance(kept, list) and np.allclose(kept, [0.2, 0.4])


def test_other_type_errors_of_a_function_with_a_list_argument_pass_through():
    def strict(u):
        raise TypeError("the caller's own message")

    with pytest.raises(TypeError, match="the caller's own message") as info:
        sd.grad(strict)([0.1, 0.2])
    assert not isinstance(info.value, sd.SymadError)


# ---------------------------------------------------------------------------
# A custom primitive with no partials
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mystery_op():
    @sd.primitive
    def mystery_op(x):
        return x**3

    return mystery_op


def test_primitive_without_partials_evaluates(mystery_op):
    def uses_mystery(x):
        return mystery_op(x) + x

    np.testing.assert_allclose(sd.trace(uses_mystery, 2.0)(2.0), 10.0, rtol=1e-12)


def test_primitive_without_partials_cannot_be_differentiated(mystery_op):
    def uses_mystery(x):
        return mystery_op(x) + x

    with pytest.raises(sd.DifferentiationError) as info:
        sd.grad(uses_mystery)(2.0)
    assert isinstance(info.value, (TypeError, ValueError))
    msg = str(info.value)
    assert "mystery_op" in msg
    assert "uses_mystery" in msg


def test_an_escaped_scalar_says_it_escaped_whatever_it_meets():
    kept = []
    sd.trace(lambda x: kept.append(x) or x, 1.0)
    for other in (1.0, sympy.Symbol("z"), sympy.pi):
        with pytest.raises(sd.SymadError, match="outside a trace: a traced value escaped"):
            kept[0] + other


def test_integer_parameters_in_weights_are_not_differentiated():
    # As integer arguments (and JAX): once differentiated silently.
    labels = sd.Parameter(np.array([1, 2]), name="labels")
    for transform in (sd.grad, sd.value_and_grad):
        with pytest.raises(sd.DifferentiationError, match=r"Parameter 'labels' holds dtype int64"):
            transform(lambda x: np.sum(labels * x), weights=[labels])(np.ones(2))
    with pytest.raises(sd.DifferentiationError, match="argument 'x'"):
        sd.grad(lambda x: np.sum(x))(np.array([1, 2]))
    floats = sd.Parameter(np.array([1.0, 2.0]), name="floats")
    grads = sd.grad(lambda x: np.sum(floats * x), weights=[floats])(np.ones(2))
    np.testing.assert_array_equal(grads[1][0], [1.0, 1.0])
    # An integer Parameter that is not differentiated is fine (its values are used as floats).
    assert sd.grad(lambda x: np.sum(labels * x))(np.ones(2)).tolist() == [1.0, 2.0]


# ---------------------------------------------------------------------------
# derivative's and taylor's own arguments: n, argnum, direction
# ---------------------------------------------------------------------------
# Each is checked when the transform is made, and a bad value raises a DifferentiationError
# naming the function, the argument and the value. The checks are chains of ``or``: with
# ``and`` for one ``or``, True (an int subclass) is taken as order or position 1 and a
# non-integer order or position is truncated by int() (1.5 to 1), silently. The largest order
# allowed, MAX_TAYLOR_ORDER = 170 (170! is the last factorial below float64's largest number),
# must itself be accepted.


def cubic(x, y):
    return x ** 3 * y


BAD_ORDERS = [True, False, 1.5, 2.0, np.float64(1.0), -1, "2", None]


@pytest.mark.parametrize("n", BAD_ORDERS, ids=repr)
@pytest.mark.parametrize("transform", [sd.derivative, sd.taylor], ids=["derivative", "taylor"])
def test_a_bad_order_is_refused_naming_n(transform, n):
    with pytest.raises(sd.DifferentiationError) as info:
        transform(cubic, n)
    message = str(info.value)
    assert f"{transform.__name__}(cubic): n must be a non-negative integer, got {n!r}" in message


@pytest.mark.parametrize("entry", BAD_ORDERS, ids=repr)
def test_a_bad_entry_of_a_tuple_of_orders_is_refused_naming_it(entry):
    with pytest.raises(sd.DifferentiationError) as info:
        sd.derivative(cubic, (1, entry))
    message = str(info.value)
    assert "derivative(cubic): every entry of n=" in message and f"got {entry!r}" in message


@pytest.mark.parametrize("argnum", [True, False, 1.5, 1.0, "1", None], ids=repr)
@pytest.mark.parametrize("transform", [sd.derivative, sd.taylor], ids=["derivative", "taylor"])
def test_a_bad_argnum_is_refused_naming_it(transform, argnum):
    with pytest.raises(sd.DifferentiationError) as info:
        transform(cubic, 2, argnum=argnum)
    message = str(info.value)
    assert f"{transform.__name__}(cubic): argnum must be an integer, got {argnum!r}" in message


@pytest.mark.parametrize("entry", [True, np.bool_(False), float("inf"), -float("inf"),
                                   float("nan"), "1", None, 1j], ids=repr)
def test_a_bad_direction_entry_is_refused_naming_it(entry):
    with pytest.raises(sd.DifferentiationError) as info:
        sd.taylor(cubic, 2, argnum=(0, 1), direction=(1.0, entry))
    message = str(info.value)
    assert "taylor(cubic): direction entries must be finite real numbers" in message
    assert f"got {entry!r}" in message


def test_a_direction_must_fit_a_tuple_argnum():
    with pytest.raises(sd.DifferentiationError, match=r"taylor\(cubic\): direction has 1 entries"):
        sd.taylor(cubic, 2, argnum=(0, 1), direction=(1.0,))
    with pytest.raises(sd.DifferentiationError, match=r"taylor\(cubic\): direction is for a tuple"):
        sd.taylor(cubic, 2, argnum=1, direction=(1.0,))


def test_the_in_range_boundaries_of_n_argnum_and_direction_are_accepted():
    import math

    # Order 170, the largest allowed: 170! = 7.26e306 is finite.
    assert float(sd.derivative(lambda x: x ** 170, 170)(0.3)) == pytest.approx(math.factorial(170),
                                                                               rel=1e-12)
    assert float(sd.taylor(np.exp, 170)(0.0)[170]) == pytest.approx(1 / math.factorial(170),
                                                                    rel=1e-12)
    assert float(sd.taylor(np.exp, 170, derivatives=True)(0.0)[170]) == pytest.approx(1.0)
    # A total order of 170 in a mixed partial; one non-zero order keeps it cheap to evaluate.
    assert float(sd.derivative(lambda x, y: x ** 170 * y, (170, 0))(0.5, 2.0)) == pytest.approx(
        2 * math.factorial(170), rel=1e-12)
    sd.derivative(cubic, (85, 85))  # made, not evaluated (its box of orders is large)
    # Order 0 is the function; NumPy integers are integers; direction entries may be ints.
    assert float(sd.derivative(cubic, 0)(2.0, 3.0)) == 24.0
    assert float(sd.derivative(cubic, np.int64(2), argnum=np.int64(1))(2.0, 3.0)) == 0.0
    assert float(sd.derivative(cubic, (np.int64(1), 0))(2.0, 3.0)) == 36.0
    series = sd.taylor(cubic, 1, argnum=(0, 1), derivatives=True, direction=(1, -2))(2.0, 3.0)
    assert [float(c) for c in series] == [24.0, 36.0 - 2 * 8.0]


@pytest.mark.parametrize("transform", [sd.grad, sd.value_and_grad], ids=["grad", "vag"])
def test_argnums_and_its_alias_grad_position_must_agree(transform):
    # grad_position is another name for argnums: two different positions are refused, the
    # same one given twice (or argnums left at its default) is not a conflict.
    for argnums, grad_position in ((1, 0), ((0, 1), (1,)), ((1,), 1)):
        with pytest.raises(sd.DifferentiationError, match="pass argnums or grad_position, not both"):
            transform(bilinear, argnums=argnums, grad_position=grad_position)
    for argnums, grad_position in ((1, 1), ((0, 1), (0, 1)), (0, 1)):
        result = transform(bilinear, argnums=argnums, grad_position=grad_position)(2.0, 3.0)
        gradient = result[1] if transform is sd.value_and_grad else result
        expected = {0: 3.0, 1: 2.0}
        if isinstance(grad_position, tuple):
            assert [float(g) for g in gradient] == [expected[p] for p in grad_position]
        else:
            assert float(gradient) == expected[grad_position]
