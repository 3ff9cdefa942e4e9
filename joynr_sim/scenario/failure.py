"""What a step raises when its expectation does not hold."""

from __future__ import annotations


class StepFailed(AssertionError):
    """A step's expectation did not hold; ``context`` carries what helps to see why."""

    def __init__(self, message: str, context: str = "") -> None:
        super().__init__(message)
        self.context = context
