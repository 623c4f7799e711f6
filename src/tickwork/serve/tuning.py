"""Process-wide tuning shared by `tickwork up` and the distributed processes."""

from __future__ import annotations

import gc

#: Allocations between two collections of the youngest generation (CPython: 700). A batch of
#: 1,000 jobs allocates some 10^5 objects that reference counting frees anyway; with 700 they
#: outlive young collections, get promoted and trigger full collections of the whole heap.
GC_YOUNG_THRESHOLD = 50_000


def tune_gc() -> None:
    """Garbage collection for a long-running process that works in batches.

    Measured on the distributed API during W1 (bench/README.md, "tickwork"): with CPython's
    defaults the collector took about a third of the process's CPU time, mostly in full
    collections (about 0.1 s each, a pause every request pays). The objects alive after
    start-up (modules, SQLAlchemy, pydantic and FastAPI structures) are frozen out of every
    later collection, and young collections run every ``GC_YOUNG_THRESHOLD`` allocations;
    cyclic garbage is still collected.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
