"""Signals the runtime raises inside handlers; not errors a caller handles."""

from __future__ import annotations


class StepCanceled(BaseException):
    """Raised inside a canceled Step's staging calls.

    A ``BaseException`` so that ``except Exception`` in user code cannot swallow it.
    """
