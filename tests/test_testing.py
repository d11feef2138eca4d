"""``symad.testing.check_grads`` on pytree arguments: it passes right derivatives and catches wrong ones."""

import numpy as np
import pytest

import symad as sd
from symad.testing import check_grads


def make_cube(second_partial_factor: float):
    """t**3 as a custom primitive whose partial 3 t**2 is itself a custom primitive with the
    partial ``second_partial_factor * t``: right at every order for 6, wrong at order 2 otherwise."""

    @sd.primitive
    def three_squared(t):
        return 3 * t**2

    @three_squared.defpartials
    def _(t):
        return (second_partial_factor * t,)

    @sd.primitive
    def cube(t):
        return t**3

    @cube.defpartials
    def _(t):
        return (three_squared(t),)

    return cube


def loss_with(cube):
    def loss(params, data):
        hidden = np.tanh(params["w"] * data["x"] + params["b"])
        return np.sum(cube(hidden) * data["scale"][0] + params["layers"][1] * data["scale"][1])

    return loss


def point():
    params = {"w": np.array([0.3, -0.7, 1.1]), "b": np.array(0.2),
              "layers": [np.array(1.5), np.array([0.5, -0.25, 2.0])]}
    data = {"x": np.array([0.5, 1.0, -1.5]), "scale": (np.array(2.0), np.array(0.5))}
    return params, data


def test_right_derivatives_of_pytree_arguments_pass_to_order_2():
    check_grads(loss_with(make_cube(6.0)), point(), order=2)
    check_grads(loss_with(make_cube(6.0)), point(), order=2, modes=("fwd",))
    check_grads(loss_with(make_cube(6.0)), point(), order=2, modes=("rev",))


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_a_wrong_second_derivative_is_caught_through_pytrees(mode):
    wrong = loss_with(make_cube(5.0))
    check_grads(wrong, point(), order=1, modes=(mode,))  # the first derivative is right
    with pytest.raises(AssertionError, match=f"{'forward' if mode == 'fwd' else 'reverse'}-mode"):
        check_grads(wrong, point(), order=2, modes=(mode,))


def test_a_wrong_first_derivative_is_caught_with_dict_and_list_arguments():
    @sd.primitive
    def softsign(t):
        return t / (1 + np.abs(t))

    @softsign.defpartials
    def _(t):
        return (1 / (1 + abs(t)),)  # should be squared

    def loss(params, xs):
        return {"out": softsign(params["a"] * xs[0]) + xs[1] ** 2}

    arguments = ({"a": np.array([0.5, 2.0])}, [np.array([1.0, -0.5]), np.array(3.0)])
    with pytest.raises(AssertionError, match="disagrees with finite differences"):
        check_grads(loss, arguments, order=1, modes=("fwd",))
    with pytest.raises(AssertionError, match="disagrees with finite differences"):
        check_grads(loss, arguments, order=1, modes=("rev",))


def test_taylor_mode_refuses_pytrees_clearly():
    with pytest.raises(sd.DifferentiationError, match="array and pytree arguments"):
        check_grads(lambda p: p["a"] ** 2, ({"a": np.array(0.5)},), modes=("taylor",))
