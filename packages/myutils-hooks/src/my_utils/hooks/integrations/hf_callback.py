"""``MyUtilsTrainerCallback``: a Hugging Face ``TrainerCallback`` running a ``ProfilingSession``.

Needs ``pip install "myutils-hooks[transformers]"``; ``transformers`` is imported here only.
HF's ``state.global_step`` counts optimizer updates, not microbatches: with
``gradient_accumulation_steps=N`` the Trainer calls ``on_step_begin`` once, then
``on_substep_end`` after each of the first N-1 microbatches and ``on_step_end`` after the last
(``global_step`` already incremented there). ``HFStepMapper`` turns that sequence into the
``(step, microbatch)`` pairs the capture controller's ``mb`` selector counts in: step =
``global_step`` at ``on_step_begin``, microbatch = substeps seen since. A microbatch region runs
from one of those callbacks to the next, so it holds the forward and backward of that input.
"""

from __future__ import annotations

import logging
import os
import weakref
from dataclasses import dataclass
from typing import Any

from transformers import TrainerCallback

from my_utils.core.errors import UsageError
from my_utils.hooks.integrations.config import IntegrationConfig
from my_utils.hooks.integrations.session import ProfilingSession

__all__ = ["HFStepMapper", "MyUtilsTrainerCallback"]

_log = logging.getLogger(__name__)


@dataclass
class HFStepMapper:
    """HF callback order -> ``(step, microbatch)``: ``begin(global_step)``, ``substep()``, ``end()``."""

    step: int | None = None
    microbatch: int = 0

    def begin(self, global_step: int) -> tuple[int, int]:
        """``on_step_begin``: the update ``global_step`` starts at microbatch 0."""
        if self.step is not None:
            raise UsageError(f"HFStepMapper.begin({global_step}) while step {self.step} is open; "
                             "the Trainer calls on_step_end before the next on_step_begin")
        self.step, self.microbatch = int(global_step), 0
        return self.step, 0

    def substep(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """``on_substep_end``: the microbatch that ended and the one that begins."""
        if self.step is None:
            raise UsageError("HFStepMapper.substep() outside a step: on_substep_end came before on_step_begin")
        ended = (self.step, self.microbatch)
        self.microbatch += 1
        return ended, (self.step, self.microbatch)

    def end(self) -> tuple[int, int]:
        """``on_step_end``: the last microbatch of the step ended (the step is closed)."""
        if self.step is None:
            raise UsageError("HFStepMapper.end() outside a step: on_step_end came before on_step_begin")
        ended = (self.step, self.microbatch)
        self.step = None
        return ended


class MyUtilsTrainerCallback(TrainerCallback):
    """Times, captures, profiles modules and monitors a ``Trainer`` run from one ``IntegrationConfig``.

    ``config`` is an ``IntegrationConfig`` or a path to its YAML/JSON file; ``backend``
    replaces the capture backend the config names. ``session`` is the running driver.
    """

    def __init__(self, config: IntegrationConfig | str | os.PathLike[str], *, backend: Any = None) -> None:
        self.config = config if isinstance(config, IntegrationConfig) else IntegrationConfig.from_file(config)
        self._backend = backend
        self.session: ProfilingSession | None = None
        self.mapper = HFStepMapper()
        self._finalizer: weakref.finalize | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        """Start the session on ``model`` with ``gradient_accumulation_steps`` microbatches per step.

        A session still open from a ``train()`` that raised is closed first (its files written).
        """
        if self._finalizer is not None and self._finalizer.alive:
            _log.warning("MyUtilsTrainerCallback: the previous train() ended without on_train_end "
                         "(it raised); closing its profiling session before starting a new one")
            self.close()
        self.session = ProfilingSession(self.config, backend=self._backend,
                                        num_microbatches=int(args.gradient_accumulation_steps))
        self.session.start(model)
        self.mapper = HFStepMapper()
        # closes the session at garbage collection or interpreter exit if on_train_end never comes
        self._finalizer = weakref.finalize(self, _close_quietly, self.session)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Microbatch 0 of update ``state.global_step`` begins."""
        if self.session is not None:
            self.session.begin_microbatch(*self.mapper.begin(state.global_step))

    def on_substep_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """A microbatch that did not step the optimizer ended; the next one begins."""
        if self.session is not None:
            ended, begun = self.mapper.substep()
            self.session.end_microbatch(*ended)
            self.session.begin_microbatch(*begun)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """The last microbatch ended and the optimizer stepped: the step ends."""
        if self.session is not None:
            step, mb = self.mapper.end()
            self.session.end_microbatch(step, mb)
            self.session.end_step(step)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Close the session: capture stopped, module summary and monitor files written."""
        self.close()

    def close(self) -> None:
        """Close the running session now (after ``train()`` raised, say); safe to call again."""
        if self._finalizer is not None:
            self._finalizer.detach()  # closed here, errors and all; not again at exit
        if self.session is not None:
            self.session.close()
        self.mapper = HFStepMapper()


def _close_quietly(session: ProfilingSession) -> None:
    # also runs at interpreter exit, after the training error was printed: never raise there
    try:
        session.close()
    except Exception:
        _log.exception("MyUtilsTrainerCallback: closing the profiling session failed")
