"""A model of PyTorch's CUDA caching allocator that records a snapshot, for tests on machines without a GPU.

It follows the rules of ``c10/cuda/CUDACachingAllocator.cpp`` that shape a snapshot: sizes
rounded up to 512 bytes; requests of at most 1 MiB served from a small pool of 2 MiB
segments, larger ones from a large pool (20 MiB segments below 10 MiB, else the size rounded
up to 2 MiB); best fit among the free blocks of the pool (smallest, then lowest address); a
block split when the rest is worth keeping (at least 512 bytes in the small pool, more than
1 MiB in the large one); a freed block merged with its free neighbours; a failed cudaMalloc
(beyond ``device_bytes``) answered by freeing every cached segment and retrying, then by an
``oom`` entry. ``empty_cache`` returns every segment without an allocated block.

The recorded snapshot has the fields and the trace actions of ``torch.cuda.memory._snapshot()``
(one device, one stream): ``alloc`` with the requested size, ``free_requested`` and
``free_completed``, ``segment_alloc``/``segment_free``, ``oom``; blocks with ``requested_size``.
Frames are whatever the caller passes (lists of frame dicts), shared as torch shares them.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CachingAllocatorModel", "OutOfMemory"]

KiB, MiB = 1 << 10, 1 << 20
MIN_BLOCK = 512
SMALL_SIZE = 1 * MiB
SMALL_BUFFER = 2 * MiB
LARGE_BUFFER = 20 * MiB
MIN_LARGE_ALLOC = 10 * MiB
ROUND_LARGE = 2 * MiB
BASE_ADDRESS = 0x7F0000000000


class OutOfMemory(Exception):
    """The model's device has no room for a request, even after freeing its cache (an ``oom`` entry was recorded)."""


@dataclass
class _Block:
    address: int
    size: int
    segment: _Segment
    requested: int = 0
    allocated: bool = False
    frames: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Segment:
    address: int
    size: int
    small: bool
    frames: list[dict[str, Any]]
    blocks: list[_Block] = field(default_factory=list)


def round_size(size: int) -> int:
    """The block size the allocator gives a request of ``size`` bytes."""
    return MIN_BLOCK if size < MIN_BLOCK else (size + MIN_BLOCK - 1) // MIN_BLOCK * MIN_BLOCK


def segment_size(rounded: int) -> int:
    """The cudaMalloc size for a block of ``rounded`` bytes that no cached block can hold."""
    if rounded <= SMALL_SIZE:
        return SMALL_BUFFER
    if rounded < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return (rounded + ROUND_LARGE - 1) // ROUND_LARGE * ROUND_LARGE


class CachingAllocatorModel:
    """One device's caching allocator; ``malloc``/``free``/``empty_cache`` record trace entries at ``time_us``."""

    def __init__(self, device_bytes: int = 80 << 30, *, start_us: int = 1_700_000_000_000_000) -> None:
        self.device_bytes = device_bytes
        self.now_us = start_us
        self.trace: list[dict[str, Any]] = []
        self.segments: dict[int, _Segment] = {}
        self.live: dict[int, _Block] = {}
        self._free: dict[bool, list[tuple[int, int]]] = {True: [], False: []}  # pool -> sorted (size, address)
        self._by_address: dict[int, _Block] = {}
        self._next_address = BASE_ADDRESS

    @property
    def reserved(self) -> int:
        """Bytes in segments (cudaMalloc'd and not freed)."""
        return sum(s.size for s in self.segments.values())

    def tick(self, us: int) -> None:
        """Advance the clock by ``us`` microseconds."""
        self.now_us += us

    def _entry(self, action: str, addr: int, size: int, frames: list[dict[str, Any]]) -> None:
        self.trace.append({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": self.now_us,
                           "frames": frames})

    def _take_free(self, small: bool, rounded: int) -> _Block | None:
        pool = self._free[small]
        i = bisect_left(pool, (rounded, -1))
        if i == len(pool):
            return None
        _, address = pool.pop(i)
        return self._by_address[address]

    def _new_segment(self, small: bool, rounded: int, frames: list[dict[str, Any]]) -> _Block | None:
        size = segment_size(rounded)
        if self.reserved + size > self.device_bytes:
            self.release_cache(frames)
            if self.reserved + size > self.device_bytes:
                return None
        address = self._next_address
        self._next_address += (size + ROUND_LARGE - 1) // ROUND_LARGE * ROUND_LARGE + ROUND_LARGE
        seg = _Segment(address, size, small, frames)
        block = _Block(address, size, seg)
        seg.blocks.append(block)
        self.segments[address] = seg
        self._by_address[address] = block
        self._entry("segment_alloc", address, size, frames)
        return block

    def malloc(self, size: int, frames: list[dict[str, Any]]) -> int:
        """Allocate ``size`` bytes for a stack ``frames``; return the address (``OutOfMemory`` if none is left)."""
        rounded = round_size(size)
        small = rounded <= SMALL_SIZE
        block = self._take_free(small, rounded) or self._new_segment(small, rounded, frames)
        if block is None:
            self.trace.append({"action": "oom", "addr": 0, "size": size, "stream": 0, "time_us": self.now_us,
                               "device_free": self.device_bytes - self.reserved, "frames": frames})
            raise OutOfMemory(f"model allocator: {size} bytes requested, {self.reserved} reserved of "
                              f"{self.device_bytes}")
        rest = block.size - rounded
        if (small and rest >= MIN_BLOCK) or (not small and rest > SMALL_SIZE):
            tail = _Block(block.address + rounded, rest, block.segment)
            seg = block.segment
            seg.blocks.insert(seg.blocks.index(block) + 1, tail)
            self._by_address[tail.address] = tail
            insort(self._free[small], (tail.size, tail.address))
            block.size = rounded
        block.allocated, block.requested, block.frames = True, size, frames
        self.live[block.address] = block
        self._entry("alloc", block.address, size, frames)
        return block.address

    def free(self, address: int) -> None:
        """Free the block at ``address`` (recorded as free_requested then free_completed, with its frames)."""
        block = self.live.pop(address)
        self._entry("free_requested", address, block.requested, block.frames)
        self._entry("free_completed", address, block.requested, block.frames)
        block.allocated, block.requested, block.frames = False, 0, []
        seg = block.segment
        i = seg.blocks.index(block)
        for j in (i + 1, i - 1):  # merge with the free neighbour after, then before
            if 0 <= j < len(seg.blocks) and not seg.blocks[j].allocated:
                other = seg.blocks[j]
                self._free[seg.small].remove((other.size, other.address))
                del self._by_address[other.address]
                if j > i:
                    block.size += other.size
                    seg.blocks.pop(j)
                else:
                    del self._by_address[block.address]
                    other.size += block.size
                    seg.blocks.pop(i)
                    block = other
                    self._by_address[block.address] = block
                i = seg.blocks.index(block)
        insort(self._free[seg.small], (block.size, block.address))

    def release_cache(self, frames: list[dict[str, Any]] | None = None) -> int:
        """Free every segment without an allocated block (``torch.cuda.empty_cache``); return the bytes freed."""
        freed = 0
        for address in sorted(self.segments):
            seg = self.segments[address]
            if len(seg.blocks) == 1 and not seg.blocks[0].allocated:
                self._free[seg.small].remove((seg.size, address))
                del self._by_address[address]
                del self.segments[address]
                self._entry("segment_free", address, seg.size, frames if frames is not None else seg.frames)
                freed += seg.size
        return freed

    def snapshot(self) -> dict[str, Any]:
        """The state and trace as ``torch.cuda.memory._snapshot()`` gives them (one device)."""
        segments = []
        for address in sorted(self.segments):
            seg = self.segments[address]
            active = [b for b in seg.blocks if b.allocated]
            allocated = sum(b.size for b in active)
            segments.append({
                "device": 0, "address": address, "total_size": seg.size, "allocated_size": allocated,
                "active_size": allocated, "requested_size": sum(b.requested for b in active), "stream": 0,
                "segment_type": "small" if seg.small else "large", "segment_pool_id": (0, 0),
                "is_expandable": False, "frames": seg.frames,
                "blocks": [{"address": b.address, "size": b.size, "requested_size": b.requested if b.allocated else 0,
                            "state": "active_allocated" if b.allocated else "inactive",
                            "frames": b.frames if b.allocated else []} for b in seg.blocks],
            })
        return {"segments": segments, "device_traces": [list(self.trace)],
                "allocator_settings": {"expandable_segments": False}}
