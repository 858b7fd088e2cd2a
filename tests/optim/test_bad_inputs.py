"""Bad inputs to the optimizers and schedulers raise clear errors; odd valid ones work.

Every must-raise case checks the exception type and that the message names the class or
method and the argument (a regular expression on the message), and that nothing changed.
The valid odd inputs (NumPy scalars, 0-d arrays, 0/1 flags, lists for betas, parameter
groups with overrides) must be accepted and give torch's numbers.
"""
from __future__ import annotations

import copy
import re
from typing import Any, Callable

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn.optim import SGD, Adagrad, Adam, AdamW, Optimizer, RMSprop
from tinygrad_rnn.optim.lr_scheduler import CosineAnnealingLR, ExponentialLR, StepLR

CLASSES = [SGD, Adam, AdamW, RMSprop, Adagrad]


def param(values: Any = (1.0, -2.0)) -> tr.Tensor:
    return tr.tensor(np.array(values, dtype=np.float64), requires_grad=True)


# ----------------------------------------------------------------------------- constructors
@pytest.mark.parametrize("cls", CLASSES, ids=[c.__name__ for c in CLASSES])
@pytest.mark.parametrize("lr,error,message", [
    ("0.1", TypeError, r"lr must be a real number, got str '0.1'"),
    (True, TypeError, r"lr must be a real number, got bool True"),
    (None, TypeError, r"lr must be a real number, got NoneType None"),
    ([0.1], TypeError, r"lr must be a real number, got list"),
    (np.array([0.1]), TypeError, r"lr must be a real number, got ndarray"),
    (-0.1, ValueError, r"Invalid learning rate: -0.1 \(lr must be >= 0\)"),
    (float("nan"), ValueError, r"Invalid learning rate: nan \(lr must be >= 0\)"),
    (float("inf"), ValueError, r"Invalid learning rate: inf \(lr must be finite\)"),
], ids=["str", "bool", "None", "list", "1-d array", "negative", "nan", "inf"])
def test_bad_learning_rates(cls: type, lr: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=rf"^{cls.__name__}: {message}"):
        cls([param()], lr=lr)


def test_a_tensor_learning_rate_is_refused() -> None:
    with pytest.raises(TypeError, match=r"^SGD: lr must be a real number, got Tensor"):
        SGD([param()], lr=tr.tensor(0.1))


BAD_HYPERPARAMETERS = [
    (SGD, dict(momentum="0.9"), TypeError, "momentum must be a real number, got str"),
    (SGD, dict(momentum=-0.5), ValueError, r"Invalid momentum value: -0.5 \(momentum must"),
    (SGD, dict(dampening="0"), TypeError, "dampening must be a real number, got str '0'"),
    (SGD, dict(dampening=float("nan")), ValueError, r"dampening value: nan \(dampening must"),
    (SGD, dict(weight_decay=float("inf")), ValueError, r"weight_decay value: inf"),
    (SGD, dict(weight_decay=None), TypeError, "weight_decay must be a real number"),
    (SGD, dict(momentum=0.9, nesterov="yes"), TypeError,
     "nesterov must be True or False, got 'yes'"),
    (SGD, dict(momentum=0.9, nesterov=2), TypeError, "nesterov must be True or False, got 2"),
    (SGD, dict(maximize=None), TypeError, "maximize must be True or False, got None"),
    (SGD, dict(maximize=1.0), TypeError, r"maximize must be True or False, got 1.0 \(float\)"),
    (SGD, dict(nesterov=True), ValueError, "Nesterov momentum requires a momentum > 0"),
    (Adam, dict(betas=0.9), TypeError,
     r"betas must be a pair of real numbers \(beta1, beta2\), got float 0.9"),
    (Adam, dict(betas="ab"), TypeError, "betas must be a pair of real numbers"),
    (Adam, dict(betas=(0.9,)), ValueError, r"Invalid betas: \(0.9,\) \(expected two values"),
    (Adam, dict(betas=("0.9", 0.999)), TypeError, r"betas\[0\] must be a real number, got str"),
    (Adam, dict(betas=(0.9, True)), TypeError, r"betas\[1\] must be a real number, got bool"),
    (Adam, dict(betas=(0.9, 1.0)), ValueError,
     r"Invalid beta parameter at index 1: 1.0 \(betas\[1\] must be in \[0, 1\)\)"),
    (Adam, dict(betas=(float("nan"), 0.9)), ValueError, "beta parameter at index 0: nan"),
    (Adam, dict(eps="1e-8"), TypeError, "eps must be a real number, got str"),
    (Adam, dict(eps=-1.0), ValueError, r"Invalid epsilon value: -1.0 \(eps must be >= 0\)"),
    (Adam, dict(amsgrad="False"), TypeError, "amsgrad must be True or False, got 'False'"),
    (Adam, dict(maximize=[]), TypeError, "maximize must be True or False"),
    (Adam, dict(decoupled_weight_decay=None), TypeError,
     "decoupled_weight_decay must be True or False, got None"),
    (AdamW, dict(weight_decay="0.01"), TypeError, "weight_decay must be a real number"),
    (AdamW, dict(betas=0.9), TypeError, "betas must be a pair"),
    (AdamW, dict(amsgrad=np.float64(1.0)), TypeError, "amsgrad must be True or False"),
    (RMSprop, dict(alpha="0.99"), TypeError, "alpha must be a real number, got str"),
    (RMSprop, dict(alpha=-0.1), ValueError, r"Invalid alpha value: -0.1"),
    (RMSprop, dict(centered="no"), TypeError, "centered must be True or False, got 'no'"),
    (RMSprop, dict(momentum=float("nan")), ValueError, "Invalid momentum value: nan"),
    (RMSprop, dict(eps=None), TypeError, "eps must be a real number, got NoneType"),
    (Adagrad, dict(lr_decay="0"), TypeError, "lr_decay must be a real number, got str"),
    (Adagrad, dict(lr_decay=float("inf")), ValueError, r"lr_decay value: inf"),
    (Adagrad, dict(initial_accumulator_value=None), TypeError,
     "initial_accumulator_value must be a real number, got NoneType"),
    (Adagrad, dict(initial_accumulator_value=-1), ValueError,
     r"Invalid initial_accumulator_value value: -1"),
    (Adagrad, dict(eps=-1e-10), ValueError, "Invalid epsilon value: -1e-10"),
    (Adagrad, dict(maximize=1.5), TypeError, "maximize must be True or False, got 1.5"),
]


@pytest.mark.parametrize("cls,kwargs,error,message", BAD_HYPERPARAMETERS,
                         ids=[f"{c.__name__}-{k}" for c, k, _, _ in BAD_HYPERPARAMETERS])
def test_bad_hyperparameters(cls: type, kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=rf"^{cls.__name__}: .*{message}"):
        cls([param()], **kwargs)


@pytest.mark.parametrize("params,message", [
    (3, "params must be an iterable of Tensors or of dicts"),
    ("ab", "params must be an iterable"),
    (param(), "single Tensor"),
    ([{"params": 5}], "'params' must be a Tensor or a list of Tensors, got int"),
    ([{"lr": 0.1}], "a parameter group needs a 'params' entry"),
    ([param(), 3], "parameter 1 of the group is a int"),
])
def test_bad_params(params: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=rf"^SGD: .*{message}"):
        SGD(params, lr=0.1)


def test_bad_group_override_and_added_group() -> None:
    a, b = param(), param()
    with pytest.raises(TypeError, match=r"^SGD: lr must be a real number, got str '0.5'"):
        SGD([{"params": [a], "lr": "0.5"}], lr=0.1)
    opt = SGD([a], lr=0.1)
    with pytest.raises(TypeError, match=r"^SGD: momentum must be a real number, got str"):
        opt.add_param_group({"params": [b], "momentum": "x"})
    assert len(opt.param_groups) == 1


# ----------------------------------------------------------------------------- step
@pytest.mark.parametrize("cls", CLASSES, ids=[c.__name__ for c in CLASSES])
def test_step_refuses_a_closure_that_is_not_callable(cls: type) -> None:
    p = param()
    opt = cls([p])
    p.grad = np.ones(2)
    with pytest.raises(TypeError, match=rf"^{cls.__name__}\.step: closure must be a callable"
                                        rf".*got int 3"):
        opt.step(closure=3)
    np.testing.assert_array_equal(p.numpy(), [1.0, -2.0])


@pytest.mark.parametrize("key,value,error,message", [
    ("lr", "0.1", TypeError, "lr must be a real number, got str '0.1'"),
    ("lr", -1.0, ValueError, r"Invalid learning rate: -1.0"),
    ("momentum", None, TypeError, "momentum must be a real number, got NoneType"),
    ("nesterov", "yes", TypeError, "nesterov must be True or False"),
])
def test_step_checks_values_written_into_param_groups(key: str, value: Any, error: type,
                                                      message: str) -> None:
    """A value written by hand into param_groups is checked before any parameter moves
    (a str lr used to be accepted by float() at the update)."""
    p, q = param(), param()
    opt = SGD([{"params": [p]}, {"params": [q]}], lr=0.1, momentum=0.5)
    p.grad, q.grad = np.ones(2), np.ones(2)
    opt.param_groups[1][key] = value
    with pytest.raises(error, match=rf"^SGD\.step: parameter group 1: {message}"):
        opt.step()
    for t in (p, q):
        np.testing.assert_array_equal(t.numpy(), [1.0, -2.0])
    assert not opt.state[p] and not opt.state[q]


def test_zero_grad_checks_set_to_none() -> None:
    p = param()
    p.grad = np.ones(2)
    with pytest.raises(TypeError, match=r"^SGD\.zero_grad: set_to_none must be True or False"):
        SGD([p], lr=0.1).zero_grad(set_to_none="no")
    SGD([p], lr=0.1).zero_grad(set_to_none=np.bool_(False))
    np.testing.assert_array_equal(p.grad, [0.0, 0.0])


# ----------------------------------------------------------------------------- load_state_dict
def trained(cls: type, **kwargs: Any) -> tuple[tr.Tensor, Optimizer, dict]:
    """An optimizer over one parameter after two steps, and its state dict."""
    p = param()
    opt = cls([p], **kwargs)
    for g in ([0.5, -1.0], [0.25, 2.0]):
        p.grad = np.array(g)
        opt.step()
    return p, opt, opt.state_dict()


def fresh(cls: type, **kwargs: Any) -> tuple[tr.Tensor, Optimizer]:
    p = param()
    return p, cls([p], **kwargs)


def assert_unchanged(opt: Optimizer, p: tr.Tensor, before: tuple) -> None:
    groups, state = before
    assert [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups] == groups
    assert set(opt.state[p]) == set(state)
    for k, v in state.items():
        np.testing.assert_array_equal(opt.state[p][k], v)


def snapshot(opt: Optimizer, p: tr.Tensor) -> tuple:
    return ([{k: copy.deepcopy(v) for k, v in g.items() if k != "params"}
             for g in opt.param_groups],
            {k: copy.deepcopy(v) for k, v in opt.state[p].items()})


def with_state(sd: dict, **changes: Any) -> dict:
    """A copy of ``sd`` with parameter 0's state entries changed (a value of DELETE
    removes the entry)."""
    sd = copy.deepcopy(sd)
    for key, value in changes.items():
        if value is DELETE:
            del sd["state"][0][key]
        else:
            sd["state"][0][key] = value
    return sd


DELETE = object()

BAD_STATE_DICTS: list[tuple[type, dict, Callable[[dict], Any], type, str]] = [
    (Adam, {}, lambda sd: None, TypeError, "state_dict must be a dict with 'state' and "
                                           "'param_groups' entries .*got NoneType"),
    (Adam, {}, lambda sd: {}, ValueError, "the state dict has no 'state' entry"),
    (Adam, {}, lambda sd: {"state": {}}, ValueError, "has no 'param_groups' entry"),
    (Adam, {}, lambda sd: [sd], TypeError, "state_dict must be a dict"),
    (Adam, {}, lambda sd: {"state": {}, "param_groups": None}, TypeError,
     "'param_groups' must be a list of dicts, got NoneType"),
    (Adam, {}, lambda sd: {"state": [], "param_groups": sd["param_groups"]}, TypeError,
     "'state' must be a dict"),
    (Adam, {}, lambda sd: {"state": {}, "param_groups": [3]}, TypeError,
     "parameter group 0 must be a dict, got int"),
    (Adam, {}, lambda sd: {"state": {}, "param_groups": [{"lr": 0.1}]}, ValueError,
     "parameter group 0 needs a 'params' list"),
    (Adam, {}, lambda sd: {"state": {0: 5}, "param_groups": sd["param_groups"]}, TypeError,
     "parameter 0: its state must be a dict of buffers, got int"),
    (Adam, {}, lambda sd: with_state(sd, exp_avg=DELETE), ValueError,
     "parameter 0: the state has no 'exp_avg' entry"),
    (Adam, {}, lambda sd: with_state(sd, exp_avg_sq=DELETE), ValueError,
     "parameter 0: the state has no 'exp_avg_sq' entry"),
    (Adam, {}, lambda sd: with_state(sd, step=DELETE), ValueError,
     "parameter 0: the state has no 'step' entry"),
    (RMSprop, {}, lambda sd: with_state(sd, square_avg=DELETE), ValueError,
     "parameter 0: the state has no 'square_avg' entry"),
    (Adagrad, {}, lambda sd: with_state(sd, sum=DELETE), ValueError,
     "parameter 0: the state has no 'sum' entry"),
    (Adam, {}, lambda sd: with_state(sd, step=float("nan")), ValueError,
     "parameter 0: invalid state entry 'step': nan"),
    (Adam, {}, lambda sd: with_state(sd, step=np.float32(-1)), ValueError,
     "parameter 0: invalid state entry 'step': -1.0"),
    (Adam, {}, lambda sd: with_state(sd, step=2.5), ValueError,
     "parameter 0: invalid state entry 'step': 2.5"),
    (Adam, {}, lambda sd: with_state(sd, step=float("inf")), ValueError,
     "parameter 0: invalid state entry 'step': inf"),
    (Adam, {}, lambda sd: with_state(sd, step="3"), TypeError,
     "parameter 0: state entry 'step' must be a number, got str '3'"),
    (Adam, {}, lambda sd: with_state(sd, step=None), TypeError,
     "parameter 0: state entry 'step' must be a number, got NoneType"),
    (Adam, {}, lambda sd: with_state(sd, step=True), TypeError,
     "parameter 0: state entry 'step' must be a number, got bool"),
    (Adam, {}, lambda sd: with_state(sd, step=np.array([1.0, 2.0])), TypeError,
     r"parameter 0: state entry 'step' must be a number .*shape \(2,\)"),
    (Adam, {}, lambda sd: with_state(sd, exp_avg_sq=np.array([0.5, -1e-3])), ValueError,
     "parameter 0: state entry 'exp_avg_sq' has negative values"),
    (Adam, dict(amsgrad=True), lambda sd: with_state(sd, max_exp_avg_sq=np.array([-1.0, 1])),
     ValueError, "parameter 0: state entry 'max_exp_avg_sq' has negative values"),
    (RMSprop, {}, lambda sd: with_state(sd, square_avg=np.array([-2.0, 1.0])), ValueError,
     "parameter 0: state entry 'square_avg' has negative values"),
    (Adagrad, {}, lambda sd: with_state(sd, sum=np.array([-2.0, 1.0])), ValueError,
     "parameter 0: state entry 'sum' has negative values"),
    (Adam, {}, lambda sd: with_state(sd, exp_avg=np.zeros(3)), ValueError,
     r"parameter 0 has shape \(2,\) but its state entry 'exp_avg' has shape \(3,\)"),
    (Adam, {}, lambda sd: with_state(sd, exp_avg=np.zeros(2, dtype=np.int64)), TypeError,
     "parameter 0: state entry 'exp_avg' has dtype int64; it must be a floating-point"),
    (Adam, {}, lambda sd: with_state(sd, exp_avg=np.zeros(2, dtype=bool)), TypeError,
     "state entry 'exp_avg' has dtype bool"),
    (Adam, {}, lambda sd: with_state(sd, exp_avg=np.zeros(2, dtype=complex)), TypeError,
     "state entry 'exp_avg' has dtype complex128"),
    (Adam, {}, lambda sd: with_state(sd, exp_avg=0.0), TypeError,
     r"parameter 0: state entry 'exp_avg' must be an array of shape \(2,\), got float"),
    (Adam, {}, lambda sd: with_state(sd, exp_avg=[0.0, 0.0]), TypeError,
     "state entry 'exp_avg' must be an array"),
    (Adam, {}, lambda sd: with_state(sd, exp_avg=None), TypeError,
     "state entry 'exp_avg' must be an array .*got NoneType"),
    (RMSprop, dict(momentum=0.5), lambda sd: with_state(sd, momentum_buffer=None), TypeError,
     "state entry 'momentum_buffer' must be an array"),
    (SGD, dict(lr=0.1, momentum=0.5), lambda sd: with_state(sd, momentum_buffer="x"),
     TypeError, "state entry 'momentum_buffer' must be an array .*got str"),
]


def _bad_state_id(case: tuple) -> str:
    return f"{case[0].__name__}-{re.sub(r'[^a-z_]+', '-', case[4][:40])}"


@pytest.mark.parametrize("cls,kwargs,corrupt,error,message", BAD_STATE_DICTS,
                         ids=[_bad_state_id(c) for c in BAD_STATE_DICTS])
def test_load_state_dict_refuses_bad_state_dicts(cls: type, kwargs: dict,
                                                 corrupt: Callable[[dict], Any], error: type,
                                                 message: str) -> None:
    _, _, sd = trained(cls, **kwargs)
    p, opt = trained(cls, **kwargs)[:2]
    before = snapshot(opt, p)
    with pytest.raises(error, match=rf"^{cls.__name__}\.load_state_dict: .*{message}"):
        opt.load_state_dict(corrupt(sd))
    assert_unchanged(opt, p, before)


@pytest.mark.parametrize("key,value,error,message", [
    ("lr", "0.1", TypeError, "lr must be a real number, got str"),
    ("betas", 0.9, TypeError, "betas must be a pair"),
    ("amsgrad", "yes", TypeError, "amsgrad must be True or False"),
    ("eps", float("nan"), ValueError, "Invalid epsilon value: nan"),
])
def test_load_state_dict_refuses_bad_hyperparameters(key: str, value: Any, error: type,
                                                     message: str) -> None:
    p, opt, sd = trained(Adam)
    sd["param_groups"][0][key] = value
    before = snapshot(opt, p)
    with pytest.raises(error, match=rf"^Adam\.load_state_dict: parameter group 0: {message}"):
        opt.load_state_dict(sd)
    assert_unchanged(opt, p, before)


def test_load_state_dict_refuses_an_index_listed_twice() -> None:
    a, b = param(), param()
    opt = SGD([a, b], lr=0.1)
    sd = opt.state_dict()
    sd["param_groups"][0]["params"] = [0, 0]
    with pytest.raises(ValueError, match=r"^SGD\.load_state_dict: parameter index 0 is listed "
                                         r"twice"):
        opt.load_state_dict(sd)


# ----------------------------------------------------------------------------- schedulers
def sgd() -> SGD:
    return SGD([param()], lr=0.1)


@pytest.mark.parametrize("make,name", [
    (lambda: StepLR("opt", step_size=2), "StepLR"),
    (lambda: ExponentialLR(None, gamma=0.5), "ExponentialLR"),
    (lambda: CosineAnnealingLR(3, T_max=10), "CosineAnnealingLR"),
    (lambda: StepLR([sgd()], step_size=2), "StepLR"),
])
def test_schedulers_refuse_a_first_argument_that_is_not_an_optimizer(make: Callable,
                                                                       name: str) -> None:
    with pytest.raises(TypeError, match=rf"^{name}: optimizer must be an Optimizer"):
        make()


@pytest.mark.parametrize("make,error,message", [
    (lambda o: StepLR(o, 2, gamma="0.1"), TypeError,
     "StepLR: gamma must be a real number, got str '0.1'"),
    (lambda o: ExponentialLR(o, gamma="0.5"), TypeError,
     "ExponentialLR: gamma must be a real number, got str"),
    (lambda o: CosineAnnealingLR(o, 10, eta_min="0"), TypeError,
     "CosineAnnealingLR: eta_min must be a real number, got str"),
    (lambda o: StepLR(o, "2"), TypeError, "StepLR: step_size must be an int, got str"),
])
def test_schedulers_refuse_string_factors(make: Callable, error: type, message: str) -> None:
    opt = sgd()
    with pytest.raises(error, match=f"^{message}"):
        make(opt)
    assert opt.param_groups[0]["lr"] == 0.1 and "initial_lr" not in opt.param_groups[0]


@pytest.mark.parametrize("epoch,error,message", [
    ("3", TypeError, "epoch must be a number \\(or None\\), got str '3'"),
    (True, TypeError, "epoch must be a number"),
    (float("nan"), ValueError, "invalid epoch: nan"),
])
def test_scheduler_step_checks_epoch(epoch: Any, error: type, message: str) -> None:
    sched = StepLR(sgd(), 2)
    with pytest.raises(error, match=rf"^StepLR\.step: {message}"):
        sched.step(epoch)
    assert sched.last_epoch == 0


@pytest.mark.parametrize("state,message", [
    (None, "state_dict must be the dict returned by state_dict\\(\\), got NoneType"),
    ([1], "got list"),
    ({"optimizer": 1}, "'optimizer' entry"),
])
def test_scheduler_load_state_dict_checks_its_argument(state: Any, message: str) -> None:
    sched = ExponentialLR(sgd(), 0.5)
    with pytest.raises(TypeError, match=rf"^ExponentialLR\.load_state_dict: .*{message}"):
        sched.load_state_dict(state)


# ----------------------------------------------------------------------------- valid odd inputs
ODD_BUT_VALID = [
    ("SGD", dict(lr=np.float32(0.25), momentum=np.array(0.5), nesterov=np.bool_(True)),
     dict(lr=float(np.float32(0.25)), momentum=0.5, nesterov=True)),
    ("SGD", dict(lr=np.int64(1), momentum=np.float64(0.9), dampening=np.array(0.1),
                 weight_decay=0, maximize=1),
     dict(lr=1, momentum=0.9, dampening=0.1, weight_decay=0, maximize=True)),
    ("Adam", dict(lr=np.array(0.01), betas=[0.9, 0.999], eps=np.float32(1e-3), amsgrad=1),
     dict(lr=0.01, betas=(0.9, 0.999), eps=float(np.float32(1e-3)), amsgrad=True)),
    ("Adam", dict(betas=np.array([0.5, 0.75]), weight_decay=np.float64(0.1), maximize=0),
     dict(betas=(0.5, 0.75), weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, betas=(np.float32(0.5), np.array(0.75)), amsgrad=np.bool_(True)),
     dict(lr=0.01, betas=(0.5, 0.75), amsgrad=True)),
    ("RMSprop", dict(lr=np.float64(0.01), alpha=np.array(0.9), centered=np.bool_(True),
                     momentum=np.int32(0)),
     dict(lr=0.01, alpha=0.9, centered=True)),
    ("Adagrad", dict(lr=np.array(0.1), lr_decay=np.float32(0.5),
                     initial_accumulator_value=np.int64(1), eps=0),
     dict(lr=0.1, lr_decay=0.5, initial_accumulator_value=1, eps=0)),
]


@pytest.mark.parametrize("name,ours_kwargs,torch_kwargs", ODD_BUT_VALID,
                         ids=[n for n, _, _ in ODD_BUT_VALID])
def test_odd_but_valid_hyperparameters_match_torch(name: str, ours_kwargs: dict,
                                                   torch_kwargs: dict) -> None:
    """NumPy scalars, 0-d arrays, 0/1 flags and lists or arrays for betas are accepted;
    0-d arrays are stored as their scalar and flags as bools; the numbers are torch's."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    init = rng.standard_normal(3)
    grads = rng.standard_normal((4, 3))
    p = tr.tensor(init.copy(), requires_grad=True)
    opt = getattr(tr.optim, name)([p], **ours_kwargs)
    for key, value in opt.param_groups[0].items():
        assert not isinstance(value, np.ndarray), key
        if key in ("nesterov", "amsgrad", "maximize", "centered"):
            assert type(value) is bool, key
    tp = torch.tensor(init.copy(), requires_grad=True)
    topt = getattr(torch.optim, name)([tp], foreach=False, **torch_kwargs)
    for g in grads:
        p.grad, tp.grad = g.copy(), torch.tensor(g)
        opt.step()
        topt.step()
    np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_param_groups_with_odd_overrides_match_torch() -> None:
    torch = pytest.importorskip("torch")
    init = [np.array([0.5, -1.0]), np.array([2.0]), np.array([[0.1, 0.2], [0.3, 0.4]])]
    grads = [[np.array([1.0, -2.0]), np.array([0.5]), np.full((2, 2), 0.25)]] * 3
    ps = [tr.tensor(a.copy(), requires_grad=True) for a in init]
    opt = SGD([{"params": [ps[0]], "lr": np.array(0.5)},
               {"params": [ps[1]], "momentum": np.float32(0.5), "nesterov": 1},
               {"params": [ps[2]], "weight_decay": np.int64(1), "maximize": np.bool_(True)}],
              lr=0.1, momentum=0.9)
    tps = [torch.tensor(a.copy(), requires_grad=True) for a in init]
    topt = torch.optim.SGD([{"params": [tps[0]], "lr": 0.5},
                            {"params": [tps[1]], "momentum": 0.5, "nesterov": True},
                            {"params": [tps[2]], "weight_decay": 1, "maximize": True}],
                           lr=0.1, momentum=0.9, foreach=False)
    for step in grads:
        for p, tp, g in zip(ps, tps, step):
            p.grad, tp.grad = g.copy(), torch.tensor(g)
        opt.step()
        topt.step()
    for p, tp in zip(ps, tps):
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-14)
    sched = StepLR(opt, 1, gamma=0.5)   # a 0-d array lr was stored as its scalar
    opt.step()
    sched.step()
    assert sched.get_last_lr() == [0.25, 0.05, 0.05]


@pytest.mark.parametrize("step", [np.float32(3), 3, 3.0, np.int64(3), np.array(3.0),
                                  np.array([3.0])])
def test_load_state_dict_accepts_every_form_of_a_step_count(step: Any) -> None:
    p, opt, sd = trained(Adam)
    sd["state"][0]["step"] = step
    opt.load_state_dict(sd)
    assert opt.state[p]["step"].dtype == np.float32 and float(opt.state[p]["step"]) == 3


def test_load_state_dict_accepts_tensor_and_torch_steps() -> None:
    p, opt, sd = trained(Adam)
    sd["state"][0]["step"] = tr.tensor(2.0)
    sd["state"][0]["exp_avg"] = tr.tensor(np.array([0.5, 0.25]))
    opt.load_state_dict(sd)
    assert float(opt.state[p]["step"]) == 2
    torch = pytest.importorskip("torch")
    sd["state"][0]["step"] = torch.tensor(4.0)
    sd["state"][0]["exp_avg_sq"] = torch.tensor([0.5, 0.25], dtype=torch.float32)
    opt.load_state_dict(sd)
    assert float(opt.state[p]["step"]) == 4
    assert opt.state[p]["exp_avg_sq"].dtype == np.float64


def test_load_state_dict_accepts_what_a_diverged_or_fresh_run_saves() -> None:
    """nan and inf in second moments (a diverged run), an empty state (no step yet), SGD's
    momentum_buffer None (torch may store it) and extra entries are all loaded."""
    p, opt, sd = trained(Adam)
    sd["state"][0]["exp_avg_sq"] = np.array([np.nan, np.inf])
    sd["state"][0]["note"] = "kept"
    opt.load_state_dict(sd)
    assert np.isnan(opt.state[p]["exp_avg_sq"][0]) and opt.state[p]["note"] == "kept"
    sd["state"][0] = {}
    opt.load_state_dict(sd)
    p.grad = np.ones(2)
    opt.step()
    assert float(opt.state[p]["step"]) == 1
    q, sgd_opt, sgd_sd = trained(SGD, lr=0.1, momentum=0.9)
    sgd_sd["state"][0]["momentum_buffer"] = None
    sgd_opt.load_state_dict(sgd_sd)
    q.grad = np.array([1.0, 2.0])
    before = q.numpy().copy()
    sgd_opt.step()                              # the buffer starts again from the gradient
    np.testing.assert_allclose(q.numpy(), before - 0.1 * np.array([1.0, 2.0]))


def test_scheduler_over_an_optimizer_with_numpy_hyperparameters() -> None:
    opt = Adam([param()], lr=np.float32(0.5))
    sched = ExponentialLR(opt, gamma=np.array(0.5))
    opt.step()
    sched.step()
    assert sched.get_last_lr() == [0.25]
