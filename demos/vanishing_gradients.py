"""From a checkout: `python demos/vanishing_gradients.py` = `tinygrad-rnn demo vanishing_gradients` (tinygrad_rnn/demos/)."""
import os, sys  # noqa: E401
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one BLAS thread, set before NumPy loads
from tinygrad_rnn.demos.vanishing_gradients import main  # noqa: E402
if __name__ == "__main__": sys.exit(main())  # noqa: E701
