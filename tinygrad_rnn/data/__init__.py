"""Data: generated long-dependency tasks (and, later, text corpora and tokenizers)."""
from .tasks import AddingBaseline, CopyTask, adding_problem, copy_problem, recall_first

__all__ = ["adding_problem", "copy_problem", "recall_first", "AddingBaseline", "CopyTask"]
