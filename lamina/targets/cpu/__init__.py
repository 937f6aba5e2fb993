"""The CPU target (through LLVM)."""
