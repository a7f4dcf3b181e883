"""Reproducible benchmarks for dexlite (``make bench`` runs ``python -m bench``).

Each scenario module exposes ``main(quick: bool) -> dict``: it prints a readable result block
and returns its figures, which ``bench/__main__.py`` saves to ``bench/results/latest.json``.
Figures are reported as ratios measured in the same run; nothing here asserts a timing.
"""
