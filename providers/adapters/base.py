from __future__ import annotations

from typing import ClassVar

from providers.types import ArmSpec, Completion, CompletionRequest


class Adapter:
    """One provider. Subclasses implement ``generate`` and may override ``config_errors``.

    The gateway creates one instance per attempt, so an adapter may keep per-attempt state
    (the mock counts its tries).
    """

    name: ClassVar[str]

    def __init__(self, arm: ArmSpec):
        self.arm = arm

    def generate(self, request: CompletionRequest) -> Completion:
        raise NotImplementedError

    @classmethod
    def config_errors(cls, model_name: str, config: dict) -> list[str]:
        """Problems with an arm's settings, each naming the offending field."""
        return []
