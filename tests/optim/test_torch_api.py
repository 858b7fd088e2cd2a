"""Optimizers and schedulers called as torch's: signatures, step(closure), zero_grad,
editable param_groups, add_param_group, torch state dicts (tensors or NumPy arrays), and the
schedulers MultiStepLR, LambdaLR and ReduceLROnPlateau: lr sequences and parameter
trajectories against torch."""
from __future__ import annotations

import inspect
import io
import math
import warnings

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn.optim import lr_scheduler as sched

torch = pytest.importorskip("torch")

OPTIMIZERS = {
    "SGD": {"lr": 0.1, "momentum": 0.9},
    "Adam": {"lr": 0.05},
    "AdamW": {"lr": 0.05},
    "RMSprop": {"lr": 0.01, "momentum": 0.5, "centered": True},
    "Adagrad": {"lr": 0.1},
}
SCHEDULERS = ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LambdaLR",
              "ReduceLROnPlateau"]


# ------------------------------------------------------------------ signatures
@pytest.mark.parametrize("name", sorted(OPTIMIZERS) + ["LBFGS"])
def test_optimizer_signatures_are_torchs(name):
    ours = inspect.signature(getattr(tr.optim, name).__init__).parameters
    theirs = inspect.signature(getattr(torch.optim, name).__init__).parameters
    assert list(ours) == list(theirs)
    for key, param in theirs.items():
        assert ours[key].kind == param.kind, key
        assert ours[key].default == param.default, key
    for method in ("step", "zero_grad", "add_param_group", "state_dict", "load_state_dict"):
        a = inspect.signature(getattr(getattr(tr.optim, name), method)).parameters
        b = inspect.signature(getattr(getattr(torch.optim, name), method)).parameters
        assert list(a) == list(b), method
        assert [p.default for p in a.values()][1:] == [p.default for p in b.values()][1:] \
            or method == "step", method


@pytest.mark.parametrize("name", SCHEDULERS)
def test_scheduler_signatures_are_torchs(name):
    ours = inspect.signature(getattr(sched, name).__init__).parameters
    theirs = inspect.signature(getattr(torch.optim.lr_scheduler, name).__init__).parameters
    assert list(ours) == list(theirs)
    for key, param in theirs.items():
        assert ours[key].default == param.default, key
    for method in ("get_last_lr", "state_dict", "load_state_dict"):
        assert hasattr(getattr(sched, name), method)


# ------------------------------------------------------------------ torch's switches
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_torch_switches_foreach_is_accepted_and_the_others_at_their_defaults(name):
    theirs = inspect.signature(getattr(torch.optim, name).__init__).parameters
    switches = [s for s in ("foreach", "fused", "capturable", "differentiable") if s in theirs]
    w = tr.tensor(np.ones(2), requires_grad=True)
    cls = getattr(tr.optim, name)
    defaults = {s: theirs[s].default for s in switches}
    cls([w], **OPTIMIZERS[name], **defaults)
    opt = cls([w], **OPTIMIZERS[name], **{**defaults, "foreach": True})
    assert not any(s in opt.param_groups[0] for s in switches)
    for switch in switches:
        if switch == "foreach":
            continue
        with pytest.raises(ValueError, match=f"{name}: {switch}=True is not supported"):
            cls([w], **OPTIMIZERS[name], **{switch: True})
    with pytest.raises(TypeError, match=f"{name}: foreach must be True or False"):
        cls([w], **OPTIMIZERS[name], foreach="yes")


# ------------------------------------------------------------------ a small problem
def problem():
    rng = np.random.default_rng(3)
    init = [rng.standard_normal((3, 2)), rng.standard_normal(2), rng.standard_normal(4)]
    x = rng.standard_normal((5, 3))
    return init, x


def loss_of(params, x, lib):
    w, b, extra = params
    h = (lib.tensor(x) @ w + b).tanh()
    return (h * h).mean() + (extra * extra).sum() * 0.1


def pair(name, groups=None, **kwargs):
    init, x = problem()
    ours = [tr.tensor(a.copy(), requires_grad=True) for a in init]
    theirs = [torch.tensor(a.copy(), requires_grad=True) for a in init]
    kwargs = {**OPTIMIZERS[name], **kwargs}
    if groups is None:
        opt = getattr(tr.optim, name)(ours[:2], **kwargs)
        ref = getattr(torch.optim, name)(theirs[:2], **kwargs)
    else:
        opt = getattr(tr.optim, name)([{"params": [ours[i] for i in g], **o}
                                       for g, o in groups], **kwargs)
        ref = getattr(torch.optim, name)([{"params": [theirs[i] for i in g], **o}
                                          for g, o in groups], **kwargs)
    return (ours, opt), (theirs, ref), x


def closures(ours, opt, theirs, ref, x):
    def closure():
        opt.zero_grad()
        loss = loss_of(ours, x, tr)
        loss.backward()
        return loss

    def ref_closure():
        ref.zero_grad()
        loss = loss_of(theirs, x, torch)
        loss.backward()
        return loss

    return closure, ref_closure


def assert_params(ours, theirs, tol=1e-12):
    for k, (p, q) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=tol, atol=tol,
                                   err_msg=f"parameter {k}")


# ------------------------------------------------------------------ step, zero_grad, groups
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_step_with_a_closure_runs_it_with_grad_enabled_and_returns_its_value(name):
    (ours, opt), (theirs, ref), x = pair(name)
    closure, ref_closure = closures(ours, opt, theirs, ref, x)
    seen = []

    def recording():
        seen.append(tr.is_grad_enabled())
        return closure()

    for _ in range(3):
        with tr.no_grad():
            loss = opt.step(recording)
        ref_loss = ref.step(ref_closure)
        assert isinstance(loss, tr.Tensor) and seen[-1] is True
        assert abs(float(loss) - ref_loss.item()) <= 1e-12
    assert_params(ours, theirs)
    assert opt.step() is None                        # no closure: returns None, as torch


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_zero_grad_sets_to_none_by_default(name):
    (ours, opt), _, x = pair(name)
    loss_of(ours, x, tr).backward()
    assert ours[0].grad is not None
    opt.zero_grad()
    assert ours[0].grad is None and ours[1].grad is None
    loss_of(ours, x, tr).backward()
    opt.zero_grad(set_to_none=False)
    assert not np.any(np.asarray(ours[0].grad))


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_lr_edits_and_add_param_group_take_effect_as_in_torch(name):
    (ours, opt), (theirs, ref), x = pair(name)
    closure, ref_closure = closures(ours, opt, theirs, ref, x)
    for step in range(6):
        if step == 2:
            for o in (opt, ref):
                for group in o.param_groups:
                    group["lr"] *= 0.5
        if step == 3:                           # unfreeze the third parameter
            opt.add_param_group({"params": [ours[2]], "lr": 0.02})
            ref.add_param_group({"params": [theirs[2]], "lr": 0.02})
        opt.step(closure)
        ref.step(ref_closure)
        assert_params(ours, theirs)
    assert [g["lr"] for g in opt.param_groups] == [g["lr"] for g in ref.param_groups]


def to_numpy(value):
    """A torch state dict with every tensor converted to NumPy (as a script would do)."""
    if isinstance(value, torch.Tensor):
        return value.detach().numpy().copy()
    if isinstance(value, dict):
        return {k: to_numpy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_numpy(v) for v in value]
    return value


@pytest.mark.parametrize("convert", [False, True], ids=["torch-tensors", "numpy"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS) + ["LBFGS"])
def test_a_torch_state_dict_loads_and_training_continues_like_torch(name, convert):
    kwargs = {"lr": 0.5, "history_size": 3, "max_iter": 4} if name == "LBFGS" else {}
    if name == "LBFGS":
        OPTIMIZERS["LBFGS"] = {}
    try:
        (ours, opt), (theirs, ref), x = pair(name, **kwargs)
    finally:
        OPTIMIZERS.pop("LBFGS", None)
    closure, ref_closure = closures(ours, opt, theirs, ref, x)
    for _ in range(3):
        ref.step(ref_closure)
    for p, q in zip(ours, theirs):
        with tr.no_grad():
            p.copy_(q.detach().numpy())
    state = ref.state_dict()
    opt.load_state_dict(to_numpy(state) if convert else state)
    # and through a checkpoint of ours
    buffer = io.BytesIO()
    tr.save(opt.state_dict(), buffer)
    buffer.seek(0)
    opt.load_state_dict(tr.load(buffer))
    for _ in range(3):
        opt.step(closure)
        ref.step(ref_closure)
    # L-BFGS runs 12 quasi-Newton iterations here, each adding rounding (see test_lbfgs.py)
    assert_params(ours, theirs, tol=1e-9 if name == "LBFGS" else 1e-12)


# ------------------------------------------------------------------ schedulers
def sgd_pair(lrs=(0.1, 0.03)):
    ours = tr.optim.SGD([{"params": [tr.tensor(np.ones(2), requires_grad=True)], "lr": lr}
                         for lr in lrs], lr=lrs[0])
    theirs = torch.optim.SGD([{"params": [torch.zeros(2, requires_grad=True)], "lr": lr}
                              for lr in lrs], lr=lrs[0])
    return ours, theirs


class Warmup:
    """A callable object with state (saved by state_dict, as torch saves it)."""

    def __init__(self, warmup):
        self.warmup = warmup

    def __call__(self, epoch):
        return min(1.0, (epoch + 1) / self.warmup) * 0.95 ** epoch


SCHEDULE_CASES = [
    ("MultiStepLR", lambda: dict(milestones=[3, 7, 7, 12], gamma=0.5)),
    ("MultiStepLR", lambda: dict(milestones=(10, 2), gamma=0.1)),
    ("MultiStepLR", lambda: dict(milestones=[])),
    ("LambdaLR", lambda: dict(lr_lambda=lambda epoch: 0.9 ** epoch)),
    ("LambdaLR", lambda: dict(lr_lambda=[lambda e: 1.0 / (e + 1), Warmup(4)])),
    ("StepLR", lambda: dict(step_size=4, gamma=0.3)),
    ("ExponentialLR", lambda: dict(gamma=0.9)),
    ("CosineAnnealingLR", lambda: dict(T_max=8, eta_min=0.001)),
]


@pytest.mark.parametrize("name,make_kwargs", SCHEDULE_CASES,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(SCHEDULE_CASES)])
def test_lr_sequences_equal_torchs_exactly(name, make_kwargs):
    opt, ref = sgd_pair()
    ours = getattr(sched, name)(opt, **make_kwargs())
    theirs = getattr(torch.optim.lr_scheduler, name)(ref, **make_kwargs())
    for epoch in range(25):
        assert ours.get_last_lr() == theirs.get_last_lr(), epoch
        assert [g["lr"] for g in opt.param_groups] == [g["lr"] for g in ref.param_groups]
        opt.step()
        ref.step()
        ours.step()
        theirs.step()
    assert ours.last_epoch == theirs.last_epoch


@pytest.mark.parametrize("name,make_kwargs", SCHEDULE_CASES[:5],
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(SCHEDULE_CASES[:5])])
def test_state_dicts_have_torchs_keys_and_resume_through_a_checkpoint(name, make_kwargs):
    opt, ref = sgd_pair()
    ours = getattr(sched, name)(opt, **make_kwargs())
    theirs = getattr(torch.optim.lr_scheduler, name)(ref, **make_kwargs())
    for _ in range(5):
        opt.step()
        ref.step()
        ours.step()
        theirs.step()
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    buffer = io.BytesIO()
    tr.save({"optimizer": opt.state_dict(), "scheduler": ours.state_dict()}, buffer)
    buffer.seek(0)
    ckpt = tr.load(buffer)
    opt2, _ = sgd_pair()
    resumed = getattr(sched, name)(opt2, **make_kwargs())
    opt2.load_state_dict(ckpt["optimizer"])
    resumed.load_state_dict(ckpt["scheduler"])
    for _ in range(10):
        for o, s in ((opt, ours), (opt2, resumed)):
            o.step()
            s.step()
        assert resumed.get_last_lr() == ours.get_last_lr()


def test_multistep_closed_form_with_an_epoch_equals_torch():
    opt, ref = sgd_pair()
    ours = sched.MultiStepLR(opt, [2, 5, 5])
    theirs = torch.optim.lr_scheduler.MultiStepLR(ref, [2, 5, 5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in (3, 6, 1, 9):
            ours.step(epoch)
            theirs.step(epoch)
            assert ours.get_last_lr() == theirs.get_last_lr(), epoch


def test_lambda_state_dict_saves_callable_objects_attributes_as_torch():
    opt, ref = sgd_pair()
    ours = sched.LambdaLR(opt, [lambda e: 1.0, Warmup(4)])
    theirs = torch.optim.lr_scheduler.LambdaLR(ref, [lambda e: 1.0, Warmup(4)])
    assert ours.state_dict()["lr_lambdas"] == theirs.state_dict()["lr_lambdas"]
    state = ours.state_dict()
    state["lr_lambdas"][1]["warmup"] = 10
    fresh = sched.LambdaLR(sgd_pair()[0], [lambda e: 1.0, Warmup(4)])
    fresh.load_state_dict(state)
    assert fresh.lr_lambdas[1].warmup == 10


METRIC_SEQUENCES = {
    "plateaus": [5.0, 4.0, 4.0, 4.0, 3.99999, 4.0, 3.0, 3.0, 3.0, 3.0, 3.0, 2.0] * 3,
    "noisy": list(2.0 + np.sin(np.arange(40) * 0.7) + 0.01 * np.arange(40)),
    "nan": [1.0, float("nan"), 1.0, 1.0, float("nan"), 0.5, 0.5, 0.5, 0.5],
}
PLATEAU_KWARGS = [
    {},
    {"patience": 1, "factor": 0.5},
    {"mode": "max", "patience": 2, "threshold": 0.01, "threshold_mode": "abs"},
    {"patience": 0, "cooldown": 2, "min_lr": [0.02, 0.001], "factor": 0.3},
    {"patience": 1, "min_lr": 0.05, "eps": 0.01},
    {"mode": "max", "threshold_mode": "rel", "threshold": 0.1, "patience": 0},
]


@pytest.mark.parametrize("kwargs", PLATEAU_KWARGS, ids=lambda k: str(k))
@pytest.mark.parametrize("metrics", sorted(METRIC_SEQUENCES))
def test_reduce_lr_on_plateau_equals_torch(kwargs, metrics):
    opt, ref = sgd_pair()
    ours = sched.ReduceLROnPlateau(opt, **kwargs)
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(ref, **kwargs)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    for k, value in enumerate(METRIC_SEQUENCES[metrics]):
        metric = tr.tensor(np.array(value)) if k % 3 == 0 else value
        ours.step(metric)
        theirs.step(value)
        assert ours.get_last_lr() == theirs.get_last_lr(), k
        assert (ours.num_bad_epochs, ours.cooldown_counter, ours.last_epoch) == \
            (theirs.num_bad_epochs, theirs.cooldown_counter, theirs.last_epoch), k
        assert repr(ours.best) == repr(theirs.best), k
    state = ours.state_dict()
    buffer = io.BytesIO()
    tr.save(state, buffer)
    buffer.seek(0)
    fresh = sched.ReduceLROnPlateau(sgd_pair()[0])
    fresh.load_state_dict(tr.load(buffer))
    assert fresh.state_dict().keys() == state.keys()
    assert repr(fresh.best) == repr(state["best"]) and fresh.mode == state["mode"]


@pytest.mark.parametrize("name", ["SGD", "Adam"])
def test_parameter_trajectories_with_schedulers_equal_torchs(name):
    """A training loop with MultiStepLR per epoch and ReduceLROnPlateau on the loss."""
    (ours, opt), (theirs, ref), x = pair(name)
    closure, ref_closure = closures(ours, opt, theirs, ref, x)
    s1, t1 = sched.MultiStepLR(opt, [3, 6]), torch.optim.lr_scheduler.MultiStepLR(ref, [3, 6])
    s2 = sched.ReduceLROnPlateau(opt, patience=0, factor=0.5, threshold=0.05)
    t2 = torch.optim.lr_scheduler.ReduceLROnPlateau(ref, patience=0, factor=0.5,
                                                    threshold=0.05)
    for epoch in range(10):
        loss = opt.step(closure)
        ref_loss = ref.step(ref_closure)
        s1.step()
        t1.step()
        s2.step(loss)
        t2.step(ref_loss.item())
        assert s2.get_last_lr() == t2.get_last_lr(), epoch
        assert_params(ours, theirs)


# ------------------------------------------------------------------ bad inputs
@pytest.mark.parametrize("make, error, message", [
    (lambda o: sched.MultiStepLR(o, 3), TypeError, "MultiStepLR: milestones must be a list"),
    (lambda o: sched.MultiStepLR(o, [2, 2.5]), ValueError, r"MultiStepLR: invalid milestones"),
    (lambda o: sched.MultiStepLR(o, ["2"]), TypeError, "MultiStepLR: milestones"),
    (lambda o: sched.MultiStepLR(o, [-1]), ValueError, "MultiStepLR: invalid milestones"),
    (lambda o: sched.MultiStepLR(o, [2], gamma="0.1"), TypeError, "MultiStepLR: gamma"),
    (lambda o: sched.LambdaLR(o, 0.5), TypeError, "LambdaLR: lr_lambda must be a function"),
    (lambda o: sched.LambdaLR(o, [lambda e: 1.0]), ValueError,
     "LambdaLR: expected 2 lr_lambdas"),
    (lambda o: sched.LambdaLR(o, lambda e: "1"), TypeError,
     "LambdaLR: lr_lambda .* must return a real number"),
    (lambda o: sched.LambdaLR(None, lambda e: 1.0), TypeError, "LambdaLR: optimizer must be"),
    (lambda o: sched.ReduceLROnPlateau(o, factor=1.0), ValueError,
     "ReduceLROnPlateau: invalid factor"),
    (lambda o: sched.ReduceLROnPlateau(o, mode="low"), ValueError,
     "ReduceLROnPlateau: mode must be 'min' or 'max'"),
    (lambda o: sched.ReduceLROnPlateau(o, threshold_mode="pct"), ValueError,
     "ReduceLROnPlateau: threshold_mode"),
    (lambda o: sched.ReduceLROnPlateau(o, patience=-1), ValueError,
     "ReduceLROnPlateau: invalid patience"),
    (lambda o: sched.ReduceLROnPlateau(o, patience="3"), TypeError,
     "ReduceLROnPlateau: patience"),
    (lambda o: sched.ReduceLROnPlateau(o, min_lr=[0.1]), ValueError,
     "ReduceLROnPlateau: expected 2 min_lrs"),
    (lambda o: sched.ReduceLROnPlateau(o, min_lr=-0.1), ValueError,
     "ReduceLROnPlateau: invalid min_lr"),
    (lambda o: sched.ReduceLROnPlateau(o, threshold=math.inf), ValueError,
     "ReduceLROnPlateau: invalid threshold"),
    (lambda o: sched.ReduceLROnPlateau(None), TypeError,
     "ReduceLROnPlateau: optimizer must be"),
    (lambda o: sched.ReduceLROnPlateau(o).step(), TypeError,
     r"ReduceLROnPlateau.step: metrics is required"),
    (lambda o: sched.ReduceLROnPlateau(o).step("low"), TypeError,
     r"ReduceLROnPlateau.step: metrics must be a number"),
    (lambda o: sched.ReduceLROnPlateau(o).step(tr.tensor(np.ones(2))), TypeError,
     r"ReduceLROnPlateau.step: metrics must be a number"),
])
def test_bad_scheduler_arguments_are_refused_by_name(make, error, message):
    opt, _ = sgd_pair()
    with pytest.raises(error, match=message):
        make(opt)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.03]
