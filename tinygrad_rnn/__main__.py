"""``python -m tinygrad_rnn``: the same command as ``tinygrad-rnn`` (see :mod:`.cli`)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
