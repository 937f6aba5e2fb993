"""The CPU target: ``tpu`` modules compiled to native code through LLVM (llvmlite)."""
