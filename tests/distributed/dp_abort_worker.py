"""Run under ``mpiexec -n 2`` by ``test_data_parallel.py``: rank 1 stops outside the train step after
the first call, while rank 0 goes on to the second, where it would wait for rank 1 forever.

    raise: rank 1 raises an uncaught RuntimeError (the abort hook must end the job at once);
    exit:  rank 1 leaves with status 0 (only the collective's deadline, LUMINAL_DIST_TIMEOUT, ends it);
    all_reduce, barrier: rank 1 goes on to its own collective instead (a data set sharded by hand gave
        rank 0 one batch more): the step's exchange must not be matched with it (garbage, or a failure
        that no rank raised), only the deadline ends the job, each rank naming what it waited in.
"""

from __future__ import annotations

import sys

import numpy as np

import luminal as lm
from luminal import distributed as dist
from luminal import nn, train


def main(mode: str):
    lm.manual_seed(0)
    model = nn.Linear(4, 3)
    g = lm.Graph()
    x, y = g.input("x", ("B", 4)), g.input("y", ("B",), dtype=lm.int32)
    step = train.compile_step(train.cross_entropy(model(x), y), train.SGD(model.parameters(), lr=0.1),
                              data_parallel=True)
    batch = {"x": np.ones((2, 4), np.float32), "y": np.zeros(2, np.int32)}
    step(**batch)
    if dist.rank() == 1:
        if mode == "raise":
            raise RuntimeError("rank 1 gives up between steps")
        if mode == "exit":
            sys.exit(0)
    else:
        step(**batch)
    if mode == "all_reduce":
        metric = dist.all_reduce(np.array([1.0 + dist.rank(), 2.0, 3.0]), "mean")
        print(f"rank {dist.rank()} metric {metric.tolist()}", flush=True)
    elif mode == "barrier":
        dist.barrier()
    print(f"rank {dist.rank()} was not stopped", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
