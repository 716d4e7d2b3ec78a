"""torch's ``nn.SyncBatchNorm`` and ``SyncBatchNorm.convert_sync_batchnorm``, for scripts written for
torch's DistributedDataParallel.

torch's SyncBatchNorm normalises a training batch by statistics all-reduced over the ranks inside the
forward. luminal's data-parallel step (``compile_step(..., data_parallel=True)``,
``luminal/train/data_parallel.py``) exchanges between its programs only, at the gradients: there is
no collective inside the forward, so batch statistics cannot be synchronised. So, as torch's own does
without a process group of more than one rank, SyncBatchNorm is BatchNorm over (N, C, *) inputs of any
rank in a single process; in training mode under an MPI launcher with more than one rank it raises
(torch's raises there too for a CPU input), naming what to use instead: ``nn.BatchNorm*d``, whose
normalisation uses each rank's own batch and whose running statistics the data-parallel step averages
over the ranks after every call. Evaluation (running statistics) works on any number of ranks, as
torch's (which does not sync in eval mode)."""

from __future__ import annotations

from luminal import distributed
from luminal.core.errors import op_error
from luminal.core.symbolic import shape_str
from luminal.nn.layers._util import bad_input, check_float, layer_name
from luminal.nn.layers.norm import _BatchNorm


class SyncBatchNorm(_BatchNorm):
    """torch's ``nn.SyncBatchNorm(num_features, eps=1e-5, momentum=0.1, affine=True,
    track_running_stats=True, process_group=None, device=None, dtype=None, *, bias=True)``: BatchNorm
    over (N, C, *) in one process (see the module docstring: no statistics are synchronised across
    ranks, and training under more than one rank is refused).

    Args:
        num_features: C. eps, momentum, affine, track_running_stats, dtype, bias: as BatchNorm's.
        process_group: must be None (luminal has no process groups). device: ignored.
    """

    _layout = "(N, {C}, *)"

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, process_group=None, device=None, dtype=None, *, bias: bool = True):
        _no_process_group(process_group)
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype=dtype, bias=bias)
        self.process_group = None

    def _check(self, x):
        name = layer_name(self)
        check_float(name, x)
        if x.ndim < 2 or x.shape[1] != self.num_features:
            raise bad_input(name, self._layout.format(C=self.num_features), x)
        if self.training and distributed.world_size() > 1:
            raise op_error(ValueError, name, f"cannot synchronise batch statistics across the "
                           f"{distributed.world_size()} ranks of this job: luminal's data-parallel step exchanges "
                           f"only gradients, between its programs, never inside the forward (torch's SyncBatchNorm "
                           f"refuses a CPU input there too). Use nn.BatchNorm{_suffix(x)} (each rank normalises by "
                           f"its own batch; the step averages the running statistics over the ranks), or train on "
                           f"one process", x)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """torch's: every BatchNorm*d in ``module`` replaced by a SyncBatchNorm holding the same
        Parameter and Buffer objects (its weight, bias and running statistics) and mode; ``module``
        itself replaced when it is one. Returns the converted module.

        Args:
            module: a module. process_group: must be None (luminal has no process groups).
        """
        _no_process_group(process_group)
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      bias=module.bias is not None)
            if module.affine:
                out.weight = module.weight
                if module.bias is not None:
                    out.bias = module.bias
            if module.track_running_stats:
                out.running_mean, out.running_var = module.running_mean, module.running_var
                out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child))
        return out


def _no_process_group(process_group) -> None:
    if process_group is not None:
        raise TypeError(f"SyncBatchNorm: process_group must be None: luminal has no process groups, and does not "
                        f"synchronise batch statistics (got {process_group!r})")


def _suffix(x) -> str:
    """The BatchNorm class name's suffix for an input of ``x``'s rank."""
    return {2: "1d", 3: "1d", 4: "2d", 5: "3d"}.get(x.ndim, f" (no BatchNorm takes {shape_str(x.shape)})")
