"""Lamina's targets (floor 6): one package per target, plus what they share — the ``.lamina`` model file
(:mod:`lamina.targets.container`) and the profile format (:mod:`lamina.targets.profile`)."""
