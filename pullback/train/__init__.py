"""What a training loop needs around the compiled step (``pb.train``): shuffled
mini-batches, a progress line, metrics, and save/load of pytrees to ``.npz``."""
