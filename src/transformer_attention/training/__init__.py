"""Lightning plumbing the tasks share: checkpoints, resuming, building a run from its config groups, what goes to
the loggers' HPARAMS and the metrics a run prints and leaves."""
