"""What a training loop needs around the compiled step (``pb.train``): shuffled
mini-batches, a progress line, metrics, and save/load of pytrees to ``.npz``."""

from .checkpoint import load, save
from .data import batches
from .metrics import RunningMean, accuracy
from .progress import Progress

__all__ = ["Progress", "RunningMean", "accuracy", "batches", "load", "save"]
