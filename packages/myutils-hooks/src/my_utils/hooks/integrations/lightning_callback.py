"""``MyUtilsLightningCallback``: a Lightning ``Callback`` running a ``ProfilingSession``.

Needs ``pip install "myutils-hooks[lightning]"``; ``lightning`` is imported here only, so
``import my_utils.hooks`` stays light. Lightning's ``trainer.global_step`` counts optimizer
steps and every ``on_train_batch_*`` call is one microbatch, so the step is ``global_step`` as
the batch begins and the microbatch index counts batches since that step began; a step ends
when ``global_step`` moves on (the optimizer stepped) or training ends.
"""

from __future__ import annotations

import os
from typing import Any

from lightning.pytorch.callbacks import Callback

from my_utils.hooks.integrations.config import IntegrationConfig
from my_utils.hooks.integrations.session import ProfilingSession

__all__ = ["MyUtilsLightningCallback"]


class MyUtilsLightningCallback(Callback):
    """Times, captures, profiles modules and monitors a Lightning fit from one ``IntegrationConfig``.

    ``config`` is an ``IntegrationConfig`` or a path to its YAML/JSON file; ``backend``
    replaces the capture backend the config names. ``session`` is the running driver.
    """

    def __init__(self, config: IntegrationConfig | str | os.PathLike[str], *, backend: Any = None) -> None:
        super().__init__()
        self.config = config if isinstance(config, IntegrationConfig) else IntegrationConfig.from_file(config)
        self._backend = backend
        self.session: ProfilingSession | None = None
        self._step: int | None = None
        self._mb = 0

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        """Start the session on the module being fitted, with ``accumulate_grad_batches`` microbatches."""
        accumulate = int(getattr(trainer, "accumulate_grad_batches", 1) or 1)
        self.session = ProfilingSession(self.config, backend=self._backend, num_microbatches=accumulate)
        self.session.start(pl_module)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        """A microbatch begins: ``(global_step, batches since that step began)``."""
        if self.session is None:
            return
        step = int(trainer.global_step)
        if step != self._step:
            self._step, self._mb = step, 0
        else:
            self._mb += 1
        self.session.begin_microbatch(step, self._mb)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        """The microbatch ended; when the optimizer stepped (``global_step`` moved) the step ends too."""
        if self.session is None or self._step is None:
            return
        self.session.end_microbatch(self._step, self._mb)
        if int(trainer.global_step) != self._step:
            self.session.end_step(self._step)
            self._step = None

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        """Close the session (a step cut short by ``max_steps`` or the epoch's end is closed too)."""
        self._close()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        """Training raised: stop capture and write what was measured."""
        self._close()

    def _close(self) -> None:
        if self.session is not None:
            self.session.close()
        self._step = None
