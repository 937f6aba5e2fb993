"""Kernel templates of the CPU target (the ABI in :mod:`.abi`)."""
