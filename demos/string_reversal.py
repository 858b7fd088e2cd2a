"""From a checkout: `python demos/string_reversal.py` = `tinygrad-rnn demo string_reversal` (tinygrad_rnn/demos/)."""
import os, sys  # noqa: E401
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one BLAS thread, set before NumPy loads
from tinygrad_rnn.demos.string_reversal import main  # noqa: E402
if __name__ == "__main__": sys.exit(main())  # noqa: E701
