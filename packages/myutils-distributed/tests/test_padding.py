"""pad_to / unpad in one process (the gathering across real gloo ranks is in test_gloo_ranks.py)."""

from __future__ import annotations

import pytest
import torch

from my_utils.core.errors import UsageError
from my_utils.distributed.padding import pad_to, unpad


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16])
@pytest.mark.parametrize("dim", [0, 1])
def test_pad_then_unpad_round_trips(dtype: torch.dtype, dim: int) -> None:
    tensor = (torch.arange(6).reshape(2, 3) % 2).to(dtype)
    padded = pad_to(tensor, 5, dim=dim, value=0)
    assert padded.shape[dim] == 5 and padded.dtype == dtype
    assert torch.equal(unpad(padded, tensor.shape[dim], dim=dim), tensor)
    assert not padded.narrow(dim, tensor.shape[dim], 5 - tensor.shape[dim]).any()


def test_edges() -> None:
    empty = torch.empty(0, 4)
    assert pad_to(empty, 2).shape == (2, 4) and unpad(pad_to(empty, 2), 0).shape == (0, 4)
    same = torch.ones(3)
    assert pad_to(same, 3) is same
    with pytest.raises(UsageError, match="already has 3 there"):
        pad_to(same, 2)
    with pytest.raises(UsageError, match=r"unpad\(length=4, dim=0\): expected 0..3"):
        unpad(same, 4)


def test_gather_needs_torch_distributed() -> None:
    from my_utils.distributed.padding import all_gather_variable

    with pytest.raises(UsageError, match=r"torch\.distributed is not initialised; call init_process_group"):
        all_gather_variable(torch.zeros([1] * 9))
