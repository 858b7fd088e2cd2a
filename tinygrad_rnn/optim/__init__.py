"""Optimizers and learning-rate schedulers, mirroring ``torch.optim``.

Each optimizer's docstring writes its update rule as math; the numbers match torch's
(float64, to rounding) for the same parameters and gradients, and ``state_dict()`` has
torch's layout. Updates are in place, under ``no_grad``, and bump the parameters' version
counters.

>>> import numpy as np
>>> import tinygrad_rnn as tr
>>> w = tr.tensor(np.zeros(3), requires_grad=True)
>>> opt = tr.optim.Adam([w], lr=0.1)
>>> sched = tr.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
>>> for _ in range(4):
...     opt.zero_grad()
...     ((w - 1.0) * (w - 1.0)).sum().backward()
...     opt.step()
...     sched.step()
>>> sched.get_last_lr()
[0.025]
"""
from __future__ import annotations

from . import lr_scheduler
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "LBFGS",
           "lr_scheduler"]
