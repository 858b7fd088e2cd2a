"""Training loops (tinygrad_rnn/training.py): ``fit``, ``train_stream``, ``EarlyStopping``.

* ``fit`` reduces the loss of a tiny recurrent regression task; with ``clip`` and a monitor it
  records one row per update and the clipped norms respect the limit;
* early stopping triggers after ``patience`` validations without improvement (more than
  ``tol``), and ``EarlyStopping`` alone follows its definition;
* the callback is called once per update, with the update's index and loss, including the
  update that triggers early stopping;
* ``train_stream`` runs a stateful TBPTT over a stream: one update per window, the state
  carried across windows and reset every epoch, the same parameters as a hand-written loop
  over ``run_truncated``; it learns a predictable stream;
* the progress bar writes nothing when disabled (tests run with ``progress=False``);
* arguments that would be silently ignored (``validate`` without ``val_every``, ``patience``
  without validation, ``patience=0``) and bad counts or streams raise errors naming them;
  ``val_every`` without ``validate`` is allowed and runs no validation (the pattern
  ``validate=val if use_val else None, val_every=50``).
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn.truncation import Window, chunked, run_truncated, williams_peng, windows
from tinygrad_rnn.training import EarlyStopping, TrainResult, fit, train_stream

F = tr.functional


class Summer(tr.nn.Module):
    """A small RNN with a linear readout of its last state: (N, T, 1) -> (N, 1)."""

    def __init__(self, H: int = 8, seed: int = 0) -> None:
        super().__init__()
        self.rnn = tr.nn.RNN(1, H, batch_first=True, dtype=np.float64, generator=seed)
        self.head = tr.nn.Linear(H, 1, dtype=np.float64, generator=seed + 1)

    def forward(self, x: Any) -> Any:
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


def sum_task(rng: np.random.Generator, n: int = 32, T: int = 5) -> tuple[Any, Any]:
    x = rng.uniform(-0.5, 0.5, size=(n, T, 1))
    return tr.Tensor(x), tr.Tensor(x.sum(axis=1))


class Param(tr.nn.Module):
    """One scalar parameter; loss (w - 1)^2."""

    def __init__(self) -> None:
        super().__init__()
        self.w = tr.nn.Parameter(np.zeros(1))

    def loss(self) -> Any:
        return ((self.w - 1.0) ** 2).sum()


# --------------------------------------------------------------------------------------------
# fit
# --------------------------------------------------------------------------------------------
def test_fit_reduces_the_loss_on_a_tiny_task() -> None:
    model = Summer()
    opt = tr.optim.Adam(model.parameters(), lr=0.03)
    rng = np.random.default_rng(0)
    x_val, y_val = sum_task(np.random.default_rng(1), n=256)

    def val_loss() -> float:
        with tr.no_grad():
            return F.mse_loss(model(x_val), y_val).item()

    def step(i: int) -> Any:
        x, y = sum_task(rng)
        return F.mse_loss(model(x), y)

    before = val_loss()
    result = fit(step, 150, opt, progress=False)
    after = val_loss()
    assert isinstance(result, TrainResult)
    assert result.steps == len(result.losses) == 150 and not result.stopped_early
    assert after < 0.1 * before
    assert np.mean(result.losses[-10:]) < 0.1 * np.mean(result.losses[:10])


def test_fit_with_clipping_and_a_monitor_records_every_update() -> None:
    model = Summer(seed=3)
    monitor = tr.monitor.GradientMonitor(model)
    opt = tr.optim.SGD(model.parameters(), lr=0.05)
    rng = np.random.default_rng(2)

    def step(i: int) -> Any:
        x, y = sum_task(rng, n=8)
        return 100.0 * F.mse_loss(model(x), y)        # large gradients: clipping is active

    fit(step, 12, opt, clip=0.5, monitor=monitor, progress=False)
    pre, post = monitor.global_norms()
    assert monitor.steps == 12 and pre.shape == post.shape == (12,)
    assert np.all(post <= 0.5 * (1 + 1e-9)) and np.all(pre >= post)
    assert np.any(pre > 0.5)
    assert monitor.state_norms().shape == (12, 5)


def test_fit_callback_is_called_once_per_update() -> None:
    p = Param()
    opt = tr.optim.SGD(p.parameters(), lr=0.1)
    calls: list = []
    result = fit(lambda i: p.loss(), 7, opt, callback=lambda s, l: calls.append((s, l)),
                 progress=False)
    assert [s for s, _ in calls] == list(range(1, 8))
    assert [v for _, v in calls] == result.losses
    # SGD on (w - 1)^2 with lr 0.1: w_{i+1} = w_i + 0.2 (1 - w_i), the loss is (1 - w_i)^2
    w = 0.0
    for v in result.losses:
        assert v == pytest.approx((1 - w) ** 2, rel=1e-12)
        w += 0.2 * (1 - w)
    assert float(p.w.numpy()[0]) == pytest.approx(w, rel=1e-12)
    assert p.w.grad is None                            # zeroed after every update


def test_fit_stops_early_after_patience_validations_without_improvement() -> None:
    p = Param()
    opt = tr.optim.SGD(p.parameters(), lr=0.0)
    scripted = iter([5.0, 4.0, 4.5, 4.2, 4.1, 1.0, 0.5])  # best 4.0, then 3 bad in a row
    calls: list = []
    result = fit(lambda i: p.loss(), 100, opt, validate=lambda: next(scripted), val_every=2,
                 patience=3, callback=lambda s, l: calls.append(s), progress=False)
    assert result.stopped_early
    assert result.steps == 10 and len(result.losses) == 10
    assert result.val_losses == [(2, 5.0), (4, 4.0), (6, 4.5), (8, 4.2), (10, 4.1)]
    # regression: the update that triggers the stop used to skip its callback
    assert calls == list(range(1, 11))


def test_fit_runs_to_the_end_while_validation_improves() -> None:
    p = Param()
    opt = tr.optim.SGD(p.parameters(), lr=0.0)
    values = iter(np.linspace(10.0, 1.0, 10))
    result = fit(lambda i: p.loss(), 20, opt, validate=lambda: next(values), val_every=2,
                 patience=1, progress=False)
    assert not result.stopped_early and result.steps == 20 and len(result.val_losses) == 10


def test_early_stopping_definition() -> None:
    stopper = EarlyStopping(patience=2, tol=0.1)
    assert stopper.update(1.0) is False and stopper.best == 1.0
    assert stopper.update(0.95) is False and stopper.best == 1.0   # within tol: not better
    assert stopper.update(0.5) is False and stopper.best == 0.5    # better: counter reset
    assert stopper.update(0.45) is False
    assert stopper.update(0.6) is True                              # second bad one in a row
    with pytest.raises(ValueError, match="patience"):
        EarlyStopping(patience=0)


VALIDATION_MISUSE = [
    # (keyword arguments, error type, message) -- each would have been silently ignored
    (dict(validate=lambda: 1.0), ValueError, "validate is given but val_every=0"),
    (dict(validate=lambda: 1.0, patience=2), ValueError, "validate is given but val_every=0"),
    (dict(patience=2), ValueError, "patience=2 needs validation"),
    (dict(patience=2, val_every=1), ValueError, "patience=2 needs validation"),
    (dict(patience=np.int64(1), val_every=5, validate=None), ValueError,
     "patience=1 needs validation"),
    (dict(validate=lambda: 1.0, val_every=1, patience=0), ValueError,
     "patience must be >= 1, got 0"),
    (dict(validate=lambda: 1.0, val_every=1, patience=-1), ValueError,
     "patience must be >= 1, got -1"),
    (dict(validate=lambda: 1.0, val_every=-2), ValueError, "val_every must be >= 0, got -2"),
    (dict(validate=lambda: 1.0, val_every=2.0), TypeError, "val_every must be an int, got float"),
    (dict(validate=lambda: 1.0, val_every=True), TypeError, "val_every must be an int, got bool"),
    (dict(validate=lambda: 1.0, val_every=1, patience=1.5), TypeError,
     "patience must be an int, got float"),
    (dict(validate=5.0, val_every=1), TypeError, "validate must be a callable"),
]


@pytest.mark.parametrize("kwargs,error,message", VALIDATION_MISUSE)
def test_fit_refuses_validation_settings_it_would_ignore(kwargs: dict, error: type,
                                                         message: str) -> None:
    p = Param()
    opt = tr.optim.SGD(p.parameters(), lr=0.1)
    with pytest.raises(error, match=r"^fit: " + message):
        fit(lambda i: p.loss(), 4, opt, progress=False, **kwargs)
    assert p.w.array[0] == 0.0 and p.w.grad is None                # no update was made


@pytest.mark.parametrize("kwargs,error,message", VALIDATION_MISUSE)
def test_train_stream_refuses_validation_settings_it_would_ignore(
        kwargs: dict, error: type, message: str) -> None:
    model = Predictor()
    before = [q.array.copy() for q in model.parameters()]
    x, target = sine_stream(12)
    opt = tr.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(error, match=r"^train_stream: " + message):
        train_stream(model.step, x, stream_loss(target), opt, chunked(4), progress=False,
                     **kwargs)
    for q, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(q.array, b)


@pytest.mark.parametrize("val_every", [1, 3, np.int64(50)])
def test_val_every_without_validate_runs_no_validation(val_every: Any) -> None:
    """``fit(..., validate=val if use_val else None, val_every=50)`` used to raise "val_every=50
    but no validate function is given"; now it trains exactly as without val_every."""
    runs = []
    for kwargs in (dict(validate=None, val_every=val_every), dict(val_every=val_every), {}):
        p = Param()
        opt = tr.optim.SGD(p.parameters(), lr=0.1)
        runs.append(fit(lambda i: p.loss(), 6, opt, progress=False, **kwargs))
    for result in runs:
        assert result.steps == 6 and result.val_losses == [] and not result.stopped_early
        assert result.losses == runs[-1].losses

    x, target = sine_stream(12)
    streams = []
    for kwargs in (dict(validate=None, val_every=val_every), {}):
        model = Predictor()
        opt = tr.optim.SGD(model.parameters(), lr=0.1)
        streams.append(train_stream(model.step, x, stream_loss(target), opt, chunked(4),
                                    epochs=2, progress=False, **kwargs))
    assert streams[0].steps == 6 and streams[0].val_losses == []
    assert streams[0].losses == streams[1].losses


@pytest.mark.parametrize("steps,error,message", [
    (-1, ValueError, "steps must be >= 0, got -1"),
    (2.0, TypeError, "steps must be an int, got float"),
    (True, TypeError, "steps must be an int, got bool")])
def test_fit_refuses_a_bad_number_of_steps(steps: Any, error: type, message: str) -> None:
    p = Param()
    opt = tr.optim.SGD(p.parameters(), lr=0.1)
    with pytest.raises(error, match="fit: " + message):
        fit(lambda i: p.loss(), steps, opt, progress=False)


def test_fit_accepts_numpy_integer_counts_and_validates_with_patience() -> None:
    p = Param()
    opt = tr.optim.SGD(p.parameters(), lr=0.0)
    result = fit(lambda i: p.loss(), np.int64(10), opt, validate=lambda: 1.0,
                 val_every=np.int32(2), patience=np.int64(2), progress=False)
    # the first validation sets the best, the next two do not improve on it: stop at 6
    assert result.val_losses == [(2, 1.0), (4, 1.0), (6, 1.0)] and result.stopped_early
    assert result.steps == 6


def test_progress_bar_writes_only_when_enabled(capsys: Any) -> None:
    p = Param()
    opt = tr.optim.SGD(p.parameters(), lr=0.1)
    fit(lambda i: p.loss(), 3, opt, progress=False, desc="quiet-run")
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""
    fit(lambda i: p.loss(), 3, opt, progress=True, desc="loud-run")
    assert "loud-run" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# train_stream: stateful TBPTT
# --------------------------------------------------------------------------------------------
class Predictor(tr.nn.Module):
    """Next-value predictor on a stream (T, 1, 1): an RNN and a readout at every step."""

    def __init__(self, H: int = 6, seed: int = 0) -> None:
        super().__init__()
        self.rnn = tr.nn.RNN(1, H, dtype=np.float64, generator=seed)
        self.head = tr.nn.Linear(H, 1, dtype=np.float64, generator=seed + 1)

    def step(self, xw: Any, h: Any) -> tuple:
        out, h_n = self.rnn(xw, h)
        return self.head(out), h_n


def sine_stream(T: int = 120) -> tuple[Any, np.ndarray]:
    t = np.arange(T + 1)
    s = np.sin(0.3 * t) + 0.5 * np.sin(0.71 * t)
    return tr.Tensor(s[:-1].reshape(T, 1, 1)), s[1:].reshape(T, 1, 1)


def stream_loss(target: np.ndarray) -> Any:
    def loss_fn(pred: Any, a: int, b: int) -> Any:
        diff = pred - tr.Tensor(target[a:b])
        return (diff * diff).sum() / (b - a)
    return loss_fn


@pytest.mark.parametrize("schedule", [chunked(10), williams_peng(7, 12)], ids=str)
def test_train_stream_carries_the_state_across_windows_and_resets_each_epoch(
        schedule: Any) -> None:
    """With lr = 0 the parameters never change, so each window's loss must be the loss of
    its steps in ONE uninterrupted forward over the stream (the state is carried), and the
    second epoch must repeat the first (the state is reset)."""
    model = Predictor()
    x, target = sine_stream(60)
    opt = tr.optim.SGD(model.parameters(), lr=0.0)
    calls: list = []
    result = train_stream(model.step, x, stream_loss(target), opt, schedule, epochs=2,
                          callback=lambda s, l: calls.append((s, l)), progress=False)
    ws = windows(60, schedule)
    assert result.steps == len(result.losses) == 2 * len(ws)
    assert [s for s, _ in calls] == list(range(1, 2 * len(ws) + 1))
    assert [v for _, v in calls] == result.losses
    with tr.no_grad():
        pred, _ = model.step(x, None)
        loss_fn = stream_loss(target)
        want = [loss_fn(pred[w.loss_start:w.stop], w.loss_start, w.stop).item() for w in ws]
    np.testing.assert_allclose(result.losses[:len(ws)], want, rtol=1e-12)
    np.testing.assert_array_equal(result.losses[len(ws):], result.losses[:len(ws)])


def test_train_stream_equals_a_hand_written_loop_over_run_truncated() -> None:
    x, target = sine_stream(50)
    schedule = williams_peng(5, 9)
    a, b = Predictor(seed=4), Predictor(seed=4)
    opt_a = tr.optim.SGD(a.parameters(), lr=0.05, momentum=0.9)
    opt_b = tr.optim.SGD(b.parameters(), lr=0.05, momentum=0.9)
    result = train_stream(a.step, x, stream_loss(target), opt_a, schedule, epochs=2, clip=1.0,
                          progress=False)
    losses = []

    def on_window(w: Window, loss: Any) -> None:
        tr.nn.utils.clip_grad_norm_(b.parameters(), 1.0)
        opt_b.step()
        opt_b.zero_grad()
        losses.append(loss.item())

    for _ in range(2):
        run_truncated(b.step, x, schedule, stream_loss(target), on_window=on_window)
    assert result.losses == losses
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(pa.numpy(), pb.numpy(), err_msg=name)


def test_train_stream_learns_a_predictable_stream() -> None:
    model = Predictor(H=8, seed=1)
    x, target = sine_stream(120)
    opt = tr.optim.Adam(model.parameters(), lr=0.02)
    per_epoch = len(windows(120, chunked(20)))
    result = train_stream(model.step, x, stream_loss(target), opt, chunked(20), epochs=15,
                          progress=False)
    first = np.mean(result.losses[:per_epoch])
    last = np.mean(result.losses[-per_epoch:])
    assert last < 0.2 * first


def test_train_stream_stops_early_and_uses_the_given_initial_state() -> None:
    model = Predictor()
    x, target = sine_stream(40)
    opt = tr.optim.SGD(model.parameters(), lr=0.0)
    scripted = iter([3.0, 2.0, 2.5, 2.6, 1.0])
    h0 = tr.Tensor(np.full((1, 1, 6), 0.3))
    result = train_stream(model.step, x, stream_loss(target), opt, chunked(4), state=h0,
                          epochs=3, validate=lambda: next(scripted), val_every=1, patience=2,
                          progress=False)
    assert result.stopped_early and result.steps == 4
    with tr.no_grad():
        pred, _ = model.step(x[:4], h0)
    assert result.losses[0] == pytest.approx(stream_loss(target)(pred, 0, 4).item(),
                                             rel=1e-12)


@pytest.mark.parametrize("x", [[[1.0]], 3.0, (np.zeros((4, 1, 1)),)], ids=["list", "float",
                                                                           "tuple"])
def test_train_stream_refuses_a_stream_that_is_not_a_tensor_or_array(x: Any) -> None:
    model = Predictor()
    opt = tr.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match=f"train_stream: x must be a Tensor or a NumPy array, "
                                        f"got {type(x).__name__}"):
        train_stream(model.step, x, lambda o, a, b: o.sum(), opt, chunked(2), progress=False)


@pytest.mark.parametrize("epochs,error", [(-1, ValueError), (1.0, TypeError)])
def test_train_stream_refuses_a_bad_number_of_epochs(epochs: Any, error: type) -> None:
    model = Predictor()
    x, target = sine_stream(8)
    opt = tr.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(error, match="train_stream: epochs must be"):
        train_stream(model.step, x, stream_loss(target), opt, chunked(4), epochs=epochs,
                     progress=False)


@pytest.mark.parametrize("tol", [-0.1, float("nan"), float("inf"), np.float32(-1)])
def test_early_stopping_refuses_a_bad_tol_value(tol: Any) -> None:
    with pytest.raises(ValueError, match="EarlyStopping: tol must be a finite number >= 0"):
        EarlyStopping(2, tol)


@pytest.mark.parametrize("tol, kind", [("0.1", "str"), (True, "bool"), (None, "NoneType"),
                                       ("a", "str")])
def test_early_stopping_refuses_a_tol_that_is_no_number(tol: Any, kind: str) -> None:
    """Regression: a string tol was a ValueError; a wrong type is a TypeError."""
    with pytest.raises(TypeError, match=re.escape(
            f"EarlyStopping: tol must be a real number, got {kind} {tol!r}")):
        EarlyStopping(2, tol)


@pytest.mark.parametrize("patience, error, message", [
    (2.5, TypeError, "patience must be an int, got float 2.5"),
    (2.0, TypeError, "patience must be an int, got float 2.0"),
    (True, TypeError, "patience must be an int, got bool True"),
    ("3", TypeError, "patience must be an int, got str '3'"),
    (0, ValueError, "patience must be >= 1, got 0"),
    (np.int64(-1), ValueError, "patience must be >= 1, got -1"),
])
def test_early_stopping_refuses_a_bad_patience(patience: Any, error: type,
                                               message: str) -> None:
    """Regression: EarlyStopping(2.5) was accepted and stored patience=2.5."""
    with pytest.raises(error, match=re.escape(f"EarlyStopping: {message}")):
        EarlyStopping(patience)


def test_early_stopping_takes_numpy_integers_as_python_ints() -> None:
    stopper = EarlyStopping(np.int64(2), tol=np.float32(0.5))
    assert stopper.patience == 2 and type(stopper.patience) is int
    assert stopper.tol == 0.5 and type(stopper.tol) is float
