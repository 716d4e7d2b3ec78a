"""``nn.utils``: torch's gradient clipping names, pointing to where luminal clips; ``nn.utils.rnn``
(``pad_sequence``, ``pack_padded_sequence``, ``PackedSequence``, ...: variable-length batches for the
recurrent layers); ``nn.utils.parametrize`` (``register_parametrization``, ``remove_parametrizations``,
``is_parametrized``, ``cached``) and ``nn.utils.parametrizations`` (``weight_norm``, ``spectral_norm``):
tensors computed in the graph from other parameters; ``parameters_to_vector`` / ``vector_to_parameters``
(``convert_parameters``); ``fuse_conv_bn_eval`` / ``fuse_linear_bn_eval`` (``fusion``); torch's older
``weight_norm`` / ``remove_weight_norm`` (``weight_g``, ``weight_v``) and ``spectral_norm`` /
``remove_spectral_norm`` (``weight_orig``, ``weight_u``, ``weight_v``).

torch clips eagerly, in place, the ``.grad`` that ``backward()`` left on each parameter. luminal keeps
no gradient on parameters: gradients are graph outputs of the compiled train step, which clips them
itself when asked (``train.compile_step(loss, opt, clip_grad_norm=..., norm_type=...)`` or
``clip_grad_value=...``), inside the same program as the update. Gradients built by hand with
``train.grad`` are clipped by ``train.clip_by_norm`` / ``train.clip_by_value``, which return new
tensors. So these functions have nothing to act on, and say where clipping goes instead.
"""

from __future__ import annotations

from typing import NoReturn

from luminal.frontend.eager import eager_only
from luminal.nn.utils import convert_parameters, fusion, parametrizations, parametrize, rnn
from luminal.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from luminal.nn.utils.fusion import (
    fuse_conv_bn_eval,
    fuse_conv_bn_weights,
    fuse_linear_bn_eval,
    fuse_linear_bn_weights,
)
from luminal.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm
from luminal.nn.utils.weight_norm import remove_weight_norm, weight_norm


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None) -> NoReturn:
    """torch's ``nn.utils.clip_grad_norm_``; raises :class:`~luminal.frontend.eager.EagerOnlyError`
    naming luminal's way: ``train.compile_step(loss, opt, clip_grad_norm=max_norm, norm_type=norm_type)``
    clips inside the compiled step (``step.last_grad_norm`` is the total norm torch returns), and
    ``train.clip_by_norm(grads, max_norm, norm_type)`` clips gradients from ``train.grad``.

    Args:
        parameters, max_norm, norm_type, error_if_nonfinite, foreach: torch's arguments (for the message).
    """
    raise eager_only("clip_grad_norm_", "luminal keeps no gradients on parameters to clip in place: pass "
                     f"clip_grad_norm={max_norm!r}, norm_type={norm_type!r} to "
                     "train.compile_step(loss, optimizer, ...), "
                     "which clips inside the compiled step (step.last_grad_norm is the total norm), or clip "
                     "gradients from train.grad with train.clip_by_norm(grads, max_norm, norm_type), which returns "
                     "(clipped gradients, total norm); compile_step's check_finite=True raises on a non-finite norm, "
                     "as error_if_nonfinite does")


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> NoReturn:
    """torch's ``nn.utils.clip_grad_value_``; raises :class:`~luminal.frontend.eager.EagerOnlyError`
    naming luminal's way: ``train.compile_step(loss, opt, clip_grad_value=clip_value)``, or
    ``train.clip_by_value(grads, clip_value)`` for gradients from ``train.grad``.

    Args:
        parameters, clip_value, foreach: torch's arguments (for the message).
    """
    raise eager_only("clip_grad_value_", "luminal keeps no gradients on parameters to clip in place: pass "
                     f"clip_grad_value={clip_value!r} to train.compile_step(loss, optimizer, ...), which clips "
                     "inside the compiled step, or clip gradients from train.grad with "
                     "train.clip_by_value(grads, clip_value)")


__all__ = ["clip_grad_norm_", "clip_grad_value_", "convert_parameters", "fuse_conv_bn_eval", "fuse_conv_bn_weights",
           "fuse_linear_bn_eval", "fuse_linear_bn_weights", "fusion", "parameters_to_vector", "parametrizations",
           "parametrize", "remove_spectral_norm", "remove_weight_norm", "rnn", "spectral_norm", "vector_to_parameters",
           "weight_norm"]
