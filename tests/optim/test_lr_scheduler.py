"""Learning-rate schedulers: the lr sequences against the closed-form formulas and, exactly,
against torch.optim.lr_scheduler; checkpoints; resuming; warnings and argument checks."""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn.optim import SGD
from tinygrad_rnn.optim.lr_scheduler import (
    CosineAnnealingLR, ExponentialLR, LRScheduler, StepLR,
)

BASE_LRS = (0.1, 0.03)
N_STEPS = 50
CONFIGS = [
    ("StepLR", dict(step_size=7, gamma=0.5)),
    ("StepLR", dict(step_size=3)),
    ("StepLR", dict(step_size=1, gamma=0.9)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("ExponentialLR", dict(gamma=1.05)),
    ("CosineAnnealingLR", dict(T_max=10, eta_min=0.001)),
    ("CosineAnnealingLR", dict(T_max=7)),
    ("CosineAnnealingLR", dict(T_max=1, eta_min=0.01)),
    ("CosineAnnealingLR", dict(T_max=50)),
]
CLASSES = {"StepLR": StepLR, "ExponentialLR": ExponentialLR,
           "CosineAnnealingLR": CosineAnnealingLR}


def closed_form(name: str, kwargs: dict, base_lr: float, epoch: int) -> float:
    """The schedule as written in the docs."""
    if name == "StepLR":
        return base_lr * kwargs.get("gamma", 0.1) ** (epoch // kwargs["step_size"])
    if name == "ExponentialLR":
        return base_lr * kwargs["gamma"] ** epoch
    eta_min, T = kwargs.get("eta_min", 0.0), kwargs["T_max"]
    return eta_min + (base_lr - eta_min) * (1 + math.cos(math.pi * epoch / T)) / 2


def make_optimizer(lrs: tuple = BASE_LRS) -> SGD:
    groups = [{"params": [tr.tensor(np.ones(2), requires_grad=True)], "lr": lr} for lr in lrs]
    return SGD(groups, lr=lrs[0])


def lr_sequence(make_scheduler: Callable[[Any], Any], opt: Any, n: int = N_STEPS) -> list:
    """[lrs after creation, lrs after step 1, ..., lrs after step n], stepping the
    optimizer first as one should (no gradients, so nothing moves)."""
    sched = make_scheduler(opt)
    seq = [list(sched.get_last_lr())]
    for _ in range(n):
        opt.step()
        sched.step()
        seq.append(list(sched.get_last_lr()))
    return seq


def torch_optimizer(lrs: tuple = BASE_LRS) -> Any:
    torch = pytest.importorskip("torch")
    groups = [{"params": [torch.zeros(2, requires_grad=True)], "lr": lr} for lr in lrs]
    return torch.optim.SGD(groups, lr=lrs[0])


def torch_scheduler(name: str) -> Callable:
    torch = pytest.importorskip("torch")
    return getattr(torch.optim.lr_scheduler, name)


def ids(configs: list) -> list:
    return [f"{n}-" + "-".join(f"{k}={v}" for k, v in kw.items()) for n, kw in configs]


@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=ids(CONFIGS))
def test_sequence_equals_torch_exactly(name: str, kwargs: dict) -> None:
    ours = lr_sequence(lambda o: CLASSES[name](o, **kwargs), make_optimizer())
    theirs = lr_sequence(lambda o: torch_scheduler(name)(o, **kwargs), torch_optimizer())
    assert ours == theirs  # the same float operations in the same order: bit for bit


@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=ids(CONFIGS))
def test_sequence_follows_the_closed_form(name: str, kwargs: dict) -> None:
    opt = make_optimizer()
    seq = lr_sequence(lambda o: CLASSES[name](o, **kwargs), opt)
    for epoch, lrs in enumerate(seq):
        for lr, base in zip(lrs, BASE_LRS):
            assert lr == pytest.approx(closed_form(name, kwargs, base, epoch), rel=1e-12,
                                       abs=1e-12 * base)
    assert [g["lr"] for g in opt.param_groups] == seq[-1]


@given(T_max=st.integers(1, 20), frac=st.floats(0.0, 0.9), base=st.floats(1e-4, 1.0),
       n=st.integers(1, 60))
def test_cosine_recursion_matches_closed_form_and_torch(T_max: int, frac: float, base: float,
                                                       n: int) -> None:
    """Past T_max the cosine climbs back up (period 2 T_max); the recursive update stays on
    the closed form, and equals torch's sequence exactly."""
    kwargs = dict(T_max=T_max, eta_min=frac * base)
    seq = lr_sequence(lambda o: CosineAnnealingLR(o, **kwargs), make_optimizer((base,)), n)
    for epoch, (lr,) in enumerate(seq):
        want = closed_form("CosineAnnealingLR", kwargs, base, epoch)
        assert abs(lr - want) <= 1e-12 * base
    theirs = lr_sequence(lambda o: torch_scheduler("CosineAnnealingLR")(o, **kwargs),
                         torch_optimizer((base,)), n)
    assert seq == theirs


def test_cosine_reaches_eta_min_at_t_max_and_base_at_twice() -> None:
    seq = lr_sequence(lambda o: CosineAnnealingLR(o, T_max=8, eta_min=0.01),
                      make_optimizer((0.5,)), 16)
    assert seq[8][0] == pytest.approx(0.01, abs=1e-15)
    assert seq[16][0] == pytest.approx(0.5, rel=1e-14)
    assert seq[4][0] == pytest.approx(0.01 + 0.49 / 2, rel=1e-14)


def test_scheduled_lr_is_used_by_the_optimizer() -> None:
    """With StepLR(step_size=2, gamma=0.1) and unit gradients, SGD moves by 1, 1, 0.1, 0.1."""
    w = tr.tensor(np.zeros(1), requires_grad=True)
    opt = SGD([w], lr=1.0)
    sched = StepLR(opt, step_size=2, gamma=0.1)
    positions = []
    for _ in range(4):
        w.grad = np.ones(1)
        opt.step()
        sched.step()
        positions.append(float(w.numpy()[0]))
    np.testing.assert_allclose(positions, [-1.0, -2.0, -2.1, -2.2], rtol=1e-15)


def test_initial_state() -> None:
    opt = make_optimizer()
    sched = CosineAnnealingLR(opt, T_max=5)
    assert sched.last_epoch == 0
    assert sched.get_last_lr() == list(BASE_LRS)
    assert sched.base_lrs == list(BASE_LRS)
    assert [g["initial_lr"] for g in opt.param_groups] == list(BASE_LRS)


@pytest.mark.parametrize("name,kwargs", CONFIGS[:6], ids=ids(CONFIGS[:6]))
def test_state_dict_round_trip(name: str, kwargs: dict) -> None:
    """Stop after 13 epochs, restore optimizer and scheduler into fresh objects, and the
    sequence continues exactly as without the interruption."""
    full = lr_sequence(lambda o: CLASSES[name](o, **kwargs), make_optimizer(), 30)

    opt = make_optimizer()
    sched = CLASSES[name](opt, **kwargs)
    for _ in range(13):
        opt.step()
        sched.step()
    opt_state, sched_state = opt.state_dict(), sched.state_dict()
    assert "optimizer" not in sched_state and sched_state["last_epoch"] == 13

    opt2 = make_optimizer((7.0, 7.0))
    sched2 = CLASSES[name](opt2, **kwargs)  # create the scheduler first, then load both
    opt2.load_state_dict(opt_state)
    sched2.load_state_dict(sched_state)
    rest = [list(sched2.get_last_lr())]
    for _ in range(17):
        opt2.step()
        sched2.step()
        rest.append(list(sched2.get_last_lr()))
    assert full[13:] == rest


@pytest.mark.parametrize("name,kwargs", CONFIGS[::2], ids=ids(CONFIGS[::2]))
def test_state_dict_equals_torch(name: str, kwargs: dict) -> None:
    opt, topt = make_optimizer(), torch_optimizer()
    sched = CLASSES[name](opt, **kwargs)
    tsched = torch_scheduler(name)(topt, **kwargs)
    for _ in range(9):
        opt.step()
        topt.step()
        sched.step()
        tsched.step()
    assert sched.state_dict() == tsched.state_dict()


def test_resume_with_last_epoch() -> None:
    """last_epoch >= 0 needs initial_lr in every group (restored with the optimizer's state);
    the resumed sequence then equals torch's."""
    with pytest.raises(KeyError, match="initial_lr"):
        CosineAnnealingLR(make_optimizer(), T_max=10, last_epoch=4)
    kwargs = dict(T_max=10, eta_min=0.001)
    at_epoch_4 = tuple(closed_form("CosineAnnealingLR", kwargs, b, 4) for b in BASE_LRS)

    def resumed(opt: Any, cls: Callable) -> list:
        for group, base in zip(opt.param_groups, BASE_LRS):
            group["initial_lr"] = base
        sched = cls(opt, last_epoch=4, **kwargs)
        assert sched.last_epoch == 5 and sched.base_lrs == list(BASE_LRS)
        seq = [list(sched.get_last_lr())]
        for _ in range(25):
            opt.step()
            sched.step()
            seq.append(list(sched.get_last_lr()))
        return seq

    ours = resumed(make_optimizer(at_epoch_4), CosineAnnealingLR)
    assert ours[0] == list(at_epoch_4)  # the initial step leaves the restored rates alone
    assert ours == resumed(torch_optimizer(at_epoch_4), torch_scheduler("CosineAnnealingLR"))


@pytest.mark.parametrize("name,kwargs", CONFIGS[::3], ids=ids(CONFIGS[::3]))
def test_step_with_epoch_uses_closed_form_and_warns(name: str, kwargs: dict) -> None:
    opt = make_optimizer()
    sched = CLASSES[name](opt, **kwargs)
    opt.step()
    with pytest.warns(UserWarning, match="deprecated"):
        sched.step(12)
    assert sched.last_epoch == 12
    want = [closed_form(name, kwargs, base, 12) for base in BASE_LRS]
    np.testing.assert_allclose(sched.get_last_lr(), want, rtol=1e-14)


def test_warns_when_scheduler_steps_before_optimizer() -> None:
    opt = make_optimizer()
    sched = StepLR(opt, step_size=2)
    with pytest.warns(UserWarning, match=r"before optimizer.step\(\)"):
        sched.step()
    opt2 = make_optimizer()
    sched2 = StepLR(opt2, step_size=2)
    opt2.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched2.step()


def test_get_lr_outside_step_warns() -> None:
    sched = ExponentialLR(make_optimizer(), gamma=0.5)
    with pytest.warns(UserWarning, match="get_last_lr"):
        sched.get_lr()


def test_argument_checks() -> None:
    with pytest.raises(TypeError, match="not an Optimizer"):
        StepLR(object(), step_size=2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="step_size: 0"):
        StepLR(make_optimizer(), step_size=0)
    with pytest.raises(ValueError, match="T_max: 0"):
        CosineAnnealingLR(make_optimizer(), T_max=0)
    assert issubclass(CosineAnnealingLR, LRScheduler)


BAD_ARGUMENTS = [
    # (make the scheduler, error type, message naming the class, argument and value)
    (lambda o: StepLR(o, "a"), TypeError, "StepLR: step_size must be an int, got str 'a'"),
    (lambda o: StepLR(o, float("inf")), ValueError,
     r"StepLR: invalid step_size: inf \(must be a whole number"),
    (lambda o: StepLR(o, float("nan")), ValueError,
     r"StepLR: invalid step_size: nan \(must be a whole number"),
    (lambda o: StepLR(o, 2.5), ValueError,
     r"StepLR: invalid step_size: 2.5 \(must be a whole number; a float is accepted only "
     r"when it is exactly an integer\)"),
    (lambda o: StepLR(o, np.float32(0.5)), ValueError,
     r"StepLR: invalid step_size: np.float32\(0.5\) \(must be a whole number"),
    (lambda o: StepLR(o, 0.0), ValueError, r"StepLR: invalid step_size: 0.0 \(must be >= 1\)"),
    (lambda o: StepLR(o, True), TypeError, "StepLR: step_size must be an int, got bool True"),
    (lambda o: StepLR(o, np.bool_(True)), TypeError,
     "StepLR: step_size must be an int, got bool"),
    (lambda o: StepLR(o, "2"), TypeError, "StepLR: step_size must be an int, got str '2'"),
    (lambda o: StepLR(o, None), TypeError, "StepLR: step_size must be an int, got NoneType"),
    (lambda o: StepLR(o, -3), ValueError, r"StepLR: invalid step_size: -3 \(must be >= 1\)"),
    (lambda o: StepLR(o, 2, gamma="a"), TypeError,
     "StepLR: gamma must be a real number, got str 'a'"),
    (lambda o: StepLR(o, 2, gamma=-0.5), ValueError, "StepLR: invalid gamma: -0.5"),
    (lambda o: ExponentialLR(o, float("nan")), ValueError, "ExponentialLR: invalid gamma: nan"),
    (lambda o: ExponentialLR(o, None), TypeError,
     "ExponentialLR: gamma must be a real number, got NoneType"),
    (lambda o: CosineAnnealingLR(o, "a"), TypeError,
     "CosineAnnealingLR: T_max must be a real number, got str 'a'"),
    (lambda o: CosineAnnealingLR(o, None), TypeError,
     "CosineAnnealingLR: T_max must be a real number, got NoneType None"),
    (lambda o: CosineAnnealingLR(o, True), TypeError,
     "CosineAnnealingLR: T_max must be a real number, got bool True"),
    (lambda o: CosineAnnealingLR(o, float("nan")), ValueError,
     r"CosineAnnealingLR: invalid T_max: nan \(must be finite and > 0\)"),
    (lambda o: CosineAnnealingLR(o, float("inf")), ValueError,
     "CosineAnnealingLR: invalid T_max: inf"),
    (lambda o: CosineAnnealingLR(o, -2.5), ValueError,
     "CosineAnnealingLR: invalid T_max: -2.5"),
    (lambda o: CosineAnnealingLR(o, 0.0), ValueError,
     "CosineAnnealingLR: invalid T_max: 0.0"),
    (lambda o: CosineAnnealingLR(o, 5, eta_min=-0.1), ValueError,
     "CosineAnnealingLR: invalid eta_min: -0.1"),
    (lambda o: CosineAnnealingLR(o, 5, eta_min=float("inf")), ValueError,
     "CosineAnnealingLR: invalid eta_min: inf"),
    (lambda o: ExponentialLR(o, 0.5, last_epoch=-2), ValueError,
     "ExponentialLR: invalid last_epoch: -2"),
    (lambda o: ExponentialLR(o, 0.5, last_epoch=1.0), TypeError,
     "ExponentialLR: last_epoch must be an int, got float"),
]


@pytest.mark.parametrize("make,error,message", BAD_ARGUMENTS)
def test_bad_arguments_raise_errors_naming_them_and_change_nothing(
        make: Callable, error: type, message: str) -> None:
    opt = make_optimizer()
    with pytest.raises(error, match="^" + message):
        make(opt)
    assert [g["lr"] for g in opt.param_groups] == list(BASE_LRS)
    assert all("initial_lr" not in g for g in opt.param_groups)


def test_numpy_integers_are_accepted_as_counts() -> None:
    opt = make_optimizer()
    sched = StepLR(opt, np.int64(2), gamma=np.float32(0.5))
    assert sched.step_size == 2
    for _ in range(2):
        opt.step()
        sched.step()
    assert sched.get_last_lr() == pytest.approx([lr * 0.5 for lr in BASE_LRS])
    assert CosineAnnealingLR(make_optimizer(), np.int32(4)).T_max == 4


@pytest.mark.parametrize("name,kwargs,int_kwargs", [
    ("StepLR", dict(step_size=2.0, gamma=0.5), dict(step_size=2, gamma=0.5)),
    ("StepLR", dict(step_size=np.float64(3.0)), dict(step_size=3)),
    ("StepLR", dict(step_size=np.float32(1.0), gamma=0.9), dict(step_size=1, gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=np.ceil(7 / 2)), dict(T_max=4)),
    ("CosineAnnealingLR", dict(T_max=10.0, eta_min=0.001), dict(T_max=10, eta_min=0.001)),
])
def test_integer_valued_floats_give_the_int_schedule_and_torchs(
        name: str, kwargs: dict, int_kwargs: dict) -> None:
    """StepLR(opt, 2.0) and CosineAnnealingLR(opt, T_max=np.ceil(7 / 2)) were refused as
    "must be an int" although torch (and this library before the check) accepts them with
    the same learning rates as the int."""
    ours = lr_sequence(lambda o: CLASSES[name](o, **kwargs), make_optimizer())
    assert ours == lr_sequence(lambda o: CLASSES[name](o, **int_kwargs), make_optimizer())
    theirs = lr_sequence(lambda o: torch_scheduler(name)(o, **kwargs), torch_optimizer())
    assert ours == theirs
    if name == "StepLR":
        sched = StepLR(make_optimizer(), **kwargs)
        assert type(sched.step_size) is int and sched.step_size == int_kwargs["step_size"]


@pytest.mark.parametrize("T_max", [3.5, 0.7, np.float32(3.3), np.float64(12.25)])
def test_cosine_accepts_any_positive_real_t_max_as_torch_does(T_max: float) -> None:
    """The cosine schedule is continuous in T_max; torch accepts T_max=3.5, and so do we."""
    ours = lr_sequence(lambda o: CosineAnnealingLR(o, T_max=T_max), make_optimizer())
    theirs = lr_sequence(lambda o: torch_scheduler("CosineAnnealingLR")(o, T_max=T_max),
                         torch_optimizer())
    assert ours == theirs
    for epoch, lrs in enumerate(ours):
        for lr, base in zip(lrs, BASE_LRS):
            want = closed_form("CosineAnnealingLR", dict(T_max=T_max), base, epoch)
            assert lr == pytest.approx(want, rel=1e-12, abs=1e-12 * base)


@pytest.mark.parametrize("T_max", [1 / 3, 2.2])
def test_cosine_never_divides_by_zero_when_the_denominator_rounds_to_zero(
        T_max: float) -> None:
    """With T_max = 1/3 (at e = 2) or 2.2 (at e = 12), 1 + cos(pi (e - 1) / T) rounds to
    exactly 0 although (e - 1 - T) % 2T is not exactly 0 (torch raises ZeroDivisionError
    there); the schedule takes the eta_min branch and stays on the closed form."""
    seq = lr_sequence(lambda o: CosineAnnealingLR(o, T_max=T_max, eta_min=0.01),
                      make_optimizer(), 30)
    for epoch, lrs in enumerate(seq):
        for lr, base in zip(lrs, BASE_LRS):
            want = closed_form("CosineAnnealingLR", dict(T_max=T_max, eta_min=0.01), base,
                               epoch)
            assert lr == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_zero_d_array_factors_are_accepted_and_stored_as_floats() -> None:
    """gamma=np.array(0.5) and T_max=np.array(4) work as their scalars (as lr and the other
    knobs do); factors are stored as Python floats so learning rates stay Python floats."""
    import tinygrad_rnn as tr
    from tinygrad_rnn.optim.lr_scheduler import CosineAnnealingLR, ExponentialLR, StepLR

    def opt():
        return tr.optim.SGD([tr.tensor(np.zeros(2), requires_grad=True)], lr=0.1)

    for sched in (StepLR(opt(), 1, gamma=np.array(0.5)), ExponentialLR(opt(), np.float32(0.5)),
                  CosineAnnealingLR(opt(), T_max=np.array(4), eta_min=np.array(0.0))):
        sched.optimizer.step()
        sched.step()
        lr = sched.optimizer.param_groups[0]["lr"]
        assert type(lr) is float and 0 < lr < 0.1
    assert type(StepLR(opt(), 1, gamma=np.float32(0.5)).gamma) is float
