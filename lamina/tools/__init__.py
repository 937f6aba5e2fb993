"""Command-line tools: ``lamina-opt`` and the ``lamina`` driver."""
