"""The ATTENTION tab of TensorBoard (docs/loggers.md): each logged example's interactive page at each step it
was logged. Light on purpose: nothing here imports torch or the rest of the package, since TensorBoard loads the
`tensorboard_plugins` entry point at start-up and an import error there stops it."""
