"""What a run shows and keeps beyond its metrics: attention maps (attention_maps.py, on examples.py's texts),
which heads and words matter (analysis.py), a per-class test report (per_class.py), a resumable checkpoint on
Ctrl-C (interrupt.py), and images and text to every logger that takes them (sinks.py)."""

from .analysis import ModelAnalysis
from .attention_maps import AttentionMapLogger
from .examples import Example, pick_examples
from .interrupt import SaveOnInterrupt
from .per_class import ClassificationReport

__all__ = ["AttentionMapLogger", "ClassificationReport", "Example", "ModelAnalysis", "SaveOnInterrupt", "pick_examples"]
