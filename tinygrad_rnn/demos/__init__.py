"""The demos, shipped with the package so ``tinygrad-rnn demo NAME`` works from any install.

Each module has ``main(argv) -> int`` and a ``parse_args``; run one with
``tinygrad-rnn demo NAME`` (``--list`` names them), ``python -m tinygrad_rnn.demos.NAME`` or,
from a source checkout, ``python demos/NAME.py``:

``quickstart``
    a small network, its backward pass and a gradient check (seconds);
``vanishing_gradients``
    the vanishing-gradient lab: ||dL/dh_t|| against distance for tanh/ReLU RNNs, a GRU and an
    LSTM, then the adding problem (docs/vanishing.md);
``string_reversal``
    a GRU encoder-decoder with and without Bahdanau attention on reversing strings
    (docs/attention.md);
``char_lm``
    n-gram, feed-forward, recurrent, convolutional and Transformer character language models
    on one corpus, compared by perplexity (docs/tutorial_2_first_rnn.md).
``sequence_models``
    recurrence, convolution and attention side by side: training time against T, generation
    time and memory against position, gradient paths, recall at growing T
    (docs/sequence_models.md).

Importing this package imports no demo (each pulls in matplotlib and its own data).
"""
