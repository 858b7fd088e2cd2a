"""Language models and their evaluation: count-based n-gram baselines and the perplexity
evaluation that every language model in the package (n-gram, feed-forward, recurrent,
convolutional, Transformer) shares.
"""
from .ngram import NGramLM
from .perplexity import (
    LMEvaluation, bits_per_token, evaluate_lm, evaluate_perplexity, ngram_perplexity,
    perplexity, with_boundaries,
)

__all__ = ["NGramLM", "perplexity", "bits_per_token", "LMEvaluation", "evaluate_lm",
           "evaluate_perplexity", "ngram_perplexity", "with_boundaries"]

# Neural language models and generation
from .models import FeedForwardLM, RNNLM, lm_loss, make_contexts
from ..decoding import generate, sample_logits  # (tinygrad_rnn/decoding.py: one decoding module)

__all__ += ["RNNLM", "FeedForwardLM", "lm_loss", "make_contexts", "generate", "sample_logits"]

# The window models: a causal convolutional LM (TCN) and a Transformer LM with a key/value
# cache (docs/sequence_models.md)
from .conv import ConvLM
from .transformer import KVCache, TransformerLM
from .windows import lm_windows, window_log_probs

__all__ += ["ConvLM", "TransformerLM", "KVCache", "lm_windows", "window_log_probs"]
