"""``MyUtilsTrainerCallback`` on a real Hugging Face ``Trainer`` (a tiny BERT built from a config: no download)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("transformers", reason="the HF integration needs transformers (requirements-test.txt)")

from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

from my_utils.core.errors import UsageError
from my_utils.core.logger import GlobalLogger
from my_utils.hooks.integrations import HFStepMapper, MyUtilsTrainerCallback

sys.path.insert(0, str(Path(__file__).parent))
from integrations_shared import ACCUMULATE, STEPS, check_outputs, write_config


@pytest.fixture(autouse=True)
def fresh_logger() -> Iterator[None]:
    GlobalLogger._reset_for_tests()
    yield
    GlobalLogger._reset_for_tests()


class Rows(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 32, (n, 6), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def tiny_bert() -> Any:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)  # 2 labels by default
    return BertForSequenceClassification(config)


def test_trainer_is_profiled_from_the_shared_config(tmp_path: Path) -> None:
    callback = MyUtilsTrainerCallback(write_config(tmp_path, "hf"))
    args = TrainingArguments(output_dir=str(tmp_path / "hf"), per_device_train_batch_size=2,
                             gradient_accumulation_steps=ACCUMULATE, max_steps=STEPS, use_cpu=True,
                             report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
                             dataloader_num_workers=0)
    trainer = Trainer(model=tiny_bert(), args=args, train_dataset=Rows(16), callbacks=[callback])
    trainer.train()
    # global_step counted optimizer updates; the session saw 2 microbatches in each
    assert trainer.state.global_step == STEPS
    assert callback.session is not None
    check_outputs(callback.session, tmp_path / "out", leaf_modules=None)
    names = callback.session.summary_path.read_text(encoding="utf-8")  # type: ignore[union-attr]
    assert "bert.embeddings.word_embeddings" in names and "classifier" in names


@given(st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=8))
def test_mapper_turns_hf_callbacks_into_step_and_microbatch(accumulations: list[int]) -> None:
    mapper = HFStepMapper()
    seen: list[tuple[int, int]] = []
    for global_step, n in enumerate(accumulations):  # the Trainer's order for n microbatches
        seen.append(mapper.begin(global_step))
        for _ in range(n - 1):
            ended, begun = mapper.substep()
            assert ended == seen[-1]
            seen.append(begun)
        assert mapper.end() == seen[-1]
    expected = [(s, mb) for s, n in enumerate(accumulations) for mb in range(n)]
    assert seen == expected


def test_mapper_rejects_callbacks_out_of_order() -> None:
    mapper = HFStepMapper()
    with pytest.raises(UsageError, match="on_substep_end came before on_step_begin"):
        mapper.substep()
    mapper.begin(0)
    with pytest.raises(UsageError, match="while step 0 is open"):
        mapper.begin(1)


class FailsAt(torch.nn.Module):
    """A tiny BERT whose ``n``-th forward raises, as a training bug or a bad batch would."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.inner, self.calls, self.n = tiny_bert(), 0, n

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> Any:
        self.calls += 1
        if self.calls == self.n:
            raise RuntimeError(f"forward {self.n} failed")
        return self.inner(input_ids=input_ids, labels=labels)


def _args(tmp_path: Path) -> TrainingArguments:
    return TrainingArguments(output_dir=str(tmp_path / "hf"), per_device_train_batch_size=2,
                             gradient_accumulation_steps=ACCUMULATE, max_steps=STEPS, use_cpu=True,
                             report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
                             dataloader_num_workers=0)


def test_a_train_that_raises_is_closed_by_the_next_train(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    callback = MyUtilsTrainerCallback(write_config(tmp_path, "hf"))
    # forward 4 is microbatch 1 of step 1: inside the capture window
    failing = Trainer(model=FailsAt(2 * ACCUMULATE), args=_args(tmp_path), train_dataset=Rows(16),
                      callbacks=[callback])
    with pytest.raises(RuntimeError, match="forward 4 failed"):
        failing.train()
    first = callback.session
    assert first is not None and first._started, "HF calls no callback on an exception: still open here"
    assert not list((tmp_path / "out" / "captures").glob("*.pt.trace.json.gz"))
    capfd.readouterr()
    Trainer(model=tiny_bert(), args=_args(tmp_path), train_dataset=Rows(16), callbacks=[callback]).train()
    assert "ended without on_train_end" in capfd.readouterr().err  # my_utils' logger writes to stderr
    assert not first._started and first.summary_path is not None
    # the failed run's window was closed with what it had, then the retry captured its own
    assert len(first.controller.completed) == 1  # type: ignore[union-attr]
    assert len(list((tmp_path / "out" / "captures").glob("*.pt.trace.json.gz"))) == 2
    assert callback.session is not first and not callback.session._started  # type: ignore[union-attr]


FAILING_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from test_integrations_hf import FailsAt, Rows, _args
from integrations_shared import write_config
from transformers import Trainer
from my_utils.hooks.integrations import MyUtilsTrainerCallback
tmp = Path({tmp!r})
callback = MyUtilsTrainerCallback(write_config(tmp, "hf"))
Trainer(model=FailsAt(4), args=_args(tmp), train_dataset=Rows(16), callbacks=[callback]).train()
"""


@pytest.mark.slow
def test_a_process_dying_of_a_training_error_still_writes_what_was_measured(tmp_path: Path) -> None:
    import subprocess

    script = FAILING_SCRIPT.format(tests=str(Path(__file__).parent), tmp=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 1 and "RuntimeError: forward 4 failed" in done.stderr, done.stderr[-2000:]
    out = tmp_path / "out"
    assert len(list((out / "captures").glob("*.pt.trace.json.gz"))) == 1  # the open window, closed at exit
    summary = (out / "module_summary_rank0.csv").read_text(encoding="utf-8").splitlines()
    assert summary[0].startswith("module_name,mean_ms") and len(summary) > 1
    from my_utils.core.profile_csv import read_profile_csv

    ends = [r for r in read_profile_csv(out / "profile_rank_0.csv") if r.event_type == "END"]
    assert [r.step for r in ends if r.event_name == "train_step"] == [0, 1]  # step 1 ended by the close
