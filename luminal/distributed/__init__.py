"""Data parallel training across processes and machines, through MPI (``mpi4py``).

Start one process per core or machine with an MPI launcher (``mpiexec -n 4 python train.py``, or
``mpiexec -f hostfile -n 16 ...`` across machines); each process is a *rank*. ``rank()``,
``world_size()``, ``barrier()``, ``all_reduce(array, op)`` and ``broadcast(array, root)`` work on host
numpy arrays in place (through the buffer protocol: no copy, no pickle). ``shard(*arrays)`` is this
rank's share of a global batch, and ``train.compile_step(..., data_parallel=True)`` sums the ranks'
gradients between backward and update (``luminal/train/data_parallel.py``).

A process started without a launcher is rank 0 of 1 and never imports mpi4py: everything here works
unchanged (collectives leave arrays as they are), so the same script runs alone and under ``mpiexec``.
``init()`` imports MPI without a launcher this package recognises (``mpi.py`` lists the ones it does).
Collectives never wait forever: ``LUMINAL_DIST_TIMEOUT`` (seconds, default 600) bounds each, and an
uncaught exception on any rank ends the job (``mpi.py``). They check their calls first: ranks that
pass arrays of other shapes or dtypes, or call other collectives, all raise a ``DistributedError``
naming each rank's call (``collectives.py``). A train step's own exchanges use a communicator of their
own, never matched with these (``mpi.internal()``).

Device buffers (CUDA) would take NCCL behind the same calls; today arrays are host numpy arrays.
"""

from luminal.distributed.collectives import all_reduce, barrier, broadcast, rank, world_size
from luminal.distributed.errors import DistributedError, ProgramMismatchError, RankFailedError
from luminal.distributed.mpi import init
from luminal.distributed.shard import shard

__all__ = ["DistributedError", "ProgramMismatchError", "RankFailedError", "all_reduce", "barrier", "broadcast",
           "init", "rank", "shard", "world_size"]
