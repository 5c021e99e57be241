"""The `tensorboard_plugins` entry point. TensorBoard imports it at start-up, outside any error handling (an import
error here stops TensorBoard), so it imports nothing but TensorBoard's base class; the plugin itself is imported in
`load`, whose failures TensorBoard logs and survives (the tab is left out)."""

from __future__ import annotations

from tensorboard.plugins import base_plugin


class AttentionLoader(base_plugin.TBLoader):
    """Loads `AttentionPlugin` when TensorBoard asks for it."""

    def load(self, context: base_plugin.TBContext) -> base_plugin.TBPlugin:
        from .plugin import AttentionPlugin  # here, not at import: see the module's docstring

        return AttentionPlugin(context)
