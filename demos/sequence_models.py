"""From a checkout: `python demos/sequence_models.py` = `tinygrad-rnn demo sequence_models` (tinygrad_rnn/demos/)."""
import os, sys  # noqa: E401
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one BLAS thread, set before NumPy loads
from tinygrad_rnn.demos.sequence_models import main  # noqa: E402
if __name__ == "__main__": sys.exit(main())  # noqa: E701
