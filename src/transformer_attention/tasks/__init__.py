"""One module per entry point, each a straight script from config to result: train.py, evaluate.py, predict.py,
pretrain.py. None imports another (an import-linter contract keeps it so); what they share is in training/."""
