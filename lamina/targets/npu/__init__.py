"""The virtual NPU target: chip descriptions, the ISA, the TIU arithmetic and the simulator."""
