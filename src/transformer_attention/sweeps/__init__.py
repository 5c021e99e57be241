"""Optuna sweeps (all that imports optuna): the Hydra sweeper (sweeper.py, on study.py and space.py) and the
job side of pruning (pruning.py). Hydra reaches the sweeper through hydra_plugins/transformer_attention_sweeper."""
