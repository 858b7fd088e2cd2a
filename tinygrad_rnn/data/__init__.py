"""Data: generated long-dependency tasks (and, later, text corpora and tokenizers)."""
from .tasks import AddingBaseline, CopyTask, adding_problem, copy_problem, recall_first
from .text import (
    BOS, BOS_ID, EOS, EOS_ID, PAD, PAD_ID, SPECIAL_TOKENS, UNK, UNK_ID, CharTokenizer, Vocab,
    WordTokenizer, batchify, lm_stream, lm_stream_batches, pad_batch, split_stream,
    train_valid_test_split,
)
from .corpus import Corpus, char_corpus, load_corpus, pydoc_text, word_corpus

__all__ = ["adding_problem", "copy_problem", "recall_first", "AddingBaseline", "CopyTask",
           "PAD", "UNK", "BOS", "EOS", "SPECIAL_TOKENS", "PAD_ID", "UNK_ID", "BOS_ID",
           "EOS_ID", "Vocab", "CharTokenizer", "WordTokenizer", "batchify", "lm_stream",
           "lm_stream_batches", "pad_batch", "train_valid_test_split", "split_stream",
           "Corpus", "load_corpus", "pydoc_text", "char_corpus", "word_corpus"]

# Generated sequence classification / labeling tasks
from .synthetic import (
    IGNORE_INDEX, SequenceTask, balanced_parens_task, is_balanced, parity_task,
    repeat_tagging_task,
)

__all__ += ["SequenceTask", "IGNORE_INDEX", "parity_task", "balanced_parens_task",
            "is_balanced", "repeat_tagging_task"]

# String reversal with noise tokens (encoder-decoder / attention demo)
from .reversal import (
    ReversalBatch, ReversalExample, ReversalTask, reversal_examples, reversal_task,
    reverse_letters,
)

__all__ += ["ReversalTask", "ReversalExample", "ReversalBatch", "reversal_task",
            "reversal_examples", "reverse_letters"]
