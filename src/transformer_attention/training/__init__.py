"""Lightning plumbing the tasks share: checkpoints (checkpoint.py), resuming (resume.py), building a run from its
config groups (builders.py, precision.py), the pretrained encoder a run starts from (pretrained.py), what goes
to the loggers' HPARAMS (hparams.py) and the metrics a run prints and leaves (metrics.py)."""
