"""Run under ``mpiexec -n 2`` by ``test_data_parallel.py``: collectives whose ranks disagree (another shape,
dtype or call). Each must raise the same ``DistributedError`` on every rank, naming each rank's call,
and leave the ranks in step: the next case's collectives work. Each rank writes a JSON line per case to
``rank<r>.jsonl`` in the directory given as the first argument.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from luminal import distributed as dist


def attempt(call) -> dict:
    try:
        out = call()
    except dist.DistributedError as e:
        return {"error": f"{type(e).__name__}: {e}"}
    return {"error": None, "value": np.asarray(out).tolist()}


def main():
    r = dist.rank()
    cases = {
        "shape": lambda: dist.all_reduce(np.ones(3 + r, np.float32)),
        "shape_big": lambda: dist.all_reduce(np.ones(3 if r == 0 else 1000, np.float32)),
        "dtype": lambda: dist.all_reduce(np.ones(4, np.float32 if r == 0 else np.float64)),
        "int_vs_float": lambda: dist.all_reduce(np.full(4, 3, np.int32 if r == 0 else np.float32)),
        "op": lambda: dist.all_reduce(np.ones(2), "sum" if r == 0 else "mean"),
        "bcast_shape": lambda: dist.broadcast(np.full(3 + 2 * r, r, np.float32), root=0),
        "bcast_root": lambda: dist.broadcast(np.zeros(2), root=r),
        "barrier_vs_all_reduce": lambda: dist.barrier() if r == 0 else dist.all_reduce(np.ones(2)),
        # after all those, the ranks are still in step
        "in_step": lambda: dist.all_reduce(np.full(2, r + 1.0)),
        "bcast_bool": lambda: dist.broadcast(np.array([r == 1, r == 0, True]), root=1),
    }
    with open(Path(sys.argv[1]) / f"rank{r}.jsonl", "w") as f:
        for name, call in cases.items():
            f.write(json.dumps({"case": name, "rank": r, **attempt(call)}) + "\n")
            f.flush()


if __name__ == "__main__":
    main()
