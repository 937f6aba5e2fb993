"""Front ends: importers from framework model formats into Lamina IR (``top`` dialect)."""
