"""A capture backend whose constructor has a bug that raises TypeError."""

from my_utils.tracing.capture import CaptureBackend


class TypeErrorBackend(CaptureBackend):
    def __init__(self, output_dir: str = ".") -> None:
        self.output_dir = output_dir + 1  # type: ignore[operator]  # the bug: str + int

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass
