"""Lamina's targets (floor 6): code generation, runtime and simulators of the machines it compiles for."""
