"""Signals the runtime raises inside handlers; not errors a caller handles."""

from __future__ import annotations


class StepCanceled(BaseException):  # noqa: N818 - a signal, not an error
    """Raised inside a canceled Step's staging calls.

    A ``BaseException`` so that ``except Exception`` in user code cannot swallow it.
    """
