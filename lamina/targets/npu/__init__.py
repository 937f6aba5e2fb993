"""The virtual NPU target."""
