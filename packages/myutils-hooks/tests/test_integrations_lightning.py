"""``MyUtilsLightningCallback`` on a real Lightning ``Trainer`` fitting a tiny CPU model."""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("lightning", reason="the Lightning integration needs lightning (requirements-test.txt)")

import lightning as L
from torch.utils.data import DataLoader, TensorDataset

from my_utils.core.logger import GlobalLogger
from my_utils.hooks.integrations import MyUtilsLightningCallback

sys.path.insert(0, str(Path(__file__).parent))
from integrations_shared import ACCUMULATE, STEPS, check_outputs, write_config

# Lightning's advice about DataLoader workers on a 4-sample CPU run is not our subject, and
# lightning 2.6.6 still builds torch's LeafSpec, which torch 2.13 deprecates (FutureWarning)
pytestmark = pytest.mark.filterwarnings("ignore::lightning.fabric.utilities.warnings.PossibleUserWarning",
                                        "ignore:.*does not have many workers.*:UserWarning",
                                        "ignore:.*LeafSpec.*is deprecated:FutureWarning")


@pytest.fixture(autouse=True)
def fresh_logger() -> Iterator[None]:
    GlobalLogger._reset_for_tests()
    yield
    GlobalLogger._reset_for_tests()


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        self.seen: list[tuple[int, int]] = []  # (global_step, batch_idx) of every microbatch

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.seen.append((self.trainer.global_step, batch_idx))
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(tmp_path: Path, callback: MyUtilsLightningCallback) -> Tiny:
    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=2)
    model = Tiny()
    trainer = L.Trainer(accelerator="cpu", max_steps=STEPS, accumulate_grad_batches=ACCUMULATE, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=tmp_path, callbacks=[callback])
    trainer.fit(model, data)
    return model


def test_lightning_fit_is_profiled_from_the_shared_config(tmp_path: Path) -> None:
    callback = MyUtilsLightningCallback(write_config(tmp_path, "lightning"))
    model = fit(tmp_path, callback)
    # 3 optimizer steps of 2 microbatches: 6 batches over two epochs of 4
    assert len(model.seen) == STEPS * ACCUMULATE
    assert [step for step, _ in model.seen] == [0, 0, 1, 1, 2, 2]  # global_step counts optimizer steps
    assert callback.session is not None
    check_outputs(callback.session, tmp_path / "out", leaf_modules=3)
    assert not callback.session.module_profiler.attached  # hooks removed when training ended


def test_training_error_closes_the_capture(tmp_path: Path) -> None:
    """The error comes inside the open window (the last microbatch of step 1): it is closed and its trace written."""
    seen_open: list[Any] = []

    class Failing(Tiny):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = super().training_step(batch, batch_idx)
            if self.seen[-1] == (1, 3):  # batch 3 = microbatch 1 of step 1: the window's microbatch
                seen_open.append(callback.session.controller.active if callback.session else None)
                raise RuntimeError("boom in the captured microbatch")
            return loss

    callback = MyUtilsLightningCallback(write_config(tmp_path, "failing"))
    data = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=2)
    trainer = L.Trainer(accelerator="cpu", max_steps=STEPS, accumulate_grad_batches=ACCUMULATE, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=tmp_path, callbacks=[callback])
    with pytest.raises(RuntimeError, match="boom in the captured microbatch"):
        trainer.fit(Failing(), data)
    # the error really was raised inside the window
    (active,) = seen_open
    assert active is not None and active.name == "last_mb"
    assert (active.started_by.iteration, active.started_by.microbatch) == (1, ACCUMULATE - 1)
    session = callback.session
    assert session is not None and session.controller is not None
    assert session.controller.active is None and not session.module_profiler.attached
    # that window, and only it, was closed, and the torch profiler's trace of it is on disk
    (info, _closing), = session.controller.completed
    assert info.name == "last_mb"
    (trace,) = (tmp_path / "out" / "captures").glob("*.pt.trace.json.gz")
    with gzip.open(trace, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    assert doc["otherData"]["myutils_capture"]["first_step"] == 1
    assert any(e.get("ph") == "X" for e in doc["traceEvents"]), "the torch profiler recorded no op"
