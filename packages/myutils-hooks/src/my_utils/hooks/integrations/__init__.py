"""Trainer integrations: one ``IntegrationConfig`` for a plain loop, Lightning and Hugging Face.

Why here, in myutils-hooks: of what the callbacks drive (MyTimer in core, capture windows in
tracing, ``ModuleProfiler`` in hooks, the monitor in memory), hooks already depends on core and
tracing, so only the monitor is optional (myutils-memory, imported when the config enables it).
Any other home would need a new dependency between distributions. ``lightning`` and
``transformers`` are extras (``myutils-hooks[lightning]``, ``[transformers]``) imported only
when their callback is first used; importing this package imports neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "IntegrationConfig": "my_utils.hooks.integrations.config",
    "ProfilingSession": "my_utils.hooks.integrations.session",
    "MyUtilsLightningCallback": "my_utils.hooks.integrations.lightning_callback",
    "MyUtilsTrainerCallback": "my_utils.hooks.integrations.hf_callback",
    "HFStepMapper": "my_utils.hooks.integrations.hf_callback",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.hooks.integrations.config import IntegrationConfig as IntegrationConfig
    from my_utils.hooks.integrations.hf_callback import HFStepMapper as HFStepMapper
    from my_utils.hooks.integrations.hf_callback import MyUtilsTrainerCallback as MyUtilsTrainerCallback
    from my_utils.hooks.integrations.lightning_callback import (
        MyUtilsLightningCallback as MyUtilsLightningCallback,
    )
    from my_utils.hooks.integrations.session import ProfilingSession as ProfilingSession
