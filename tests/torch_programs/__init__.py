"""Small, complete PyTorch RNN programs, written for torch, that the runner
(tests/test_torch_programs.py) also runs with only their imports renamed to tinygrad_rnn.

Each program has ``main(steps=3, seed=0, init_hook=None) -> list[float]``: it builds its
model(s), calls ``init_hook(name, module)`` for each before making the optimizer (the runner
uses this to give both libraries the same initial weights), trains for ``steps`` steps on
small data generated with NumPy, and returns the losses it saw.
"""
