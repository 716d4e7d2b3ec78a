"""Checkpoints: model, optimizer state, scheduler, step runner (and your own values) in one
safetensors file, written atomically, so that a resumed run continues exactly like one that did
not stop.

Arrays are tensors named ``model.<name>``, ``optim.<key>`` and ``step.<key>``; everything else
(optimizer step count and hyperparameters, scheduler state, the graph's random generator, ``extra``)
is JSON in the file's metadata.
"""

from __future__ import annotations

import json
import numbers

import numpy as np

from luminal.core.interrupts import interrupts_deferred
from luminal.core.safetensors_io import load_with_metadata, save_file

FORMAT = "luminal-checkpoint/1"


def _plain(value, where: str):
    """``value`` as JSON's Python types. numpy scalars and 0-d arrays (an epoch counted with np.int64,
    a loss read back as np.float32) become their Python values, as they print; anything else JSON
    cannot hold is a TypeError naming its place in ``extra``, not json's "Object of type ..."."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (np.generic, np.ndarray)) and np.ndim(value) == 0 and np.asarray(value).dtype.kind in "biuf":
        return np.asarray(value).item()
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            k = k.item() if isinstance(k, np.generic) else k
            if not isinstance(k, (str, int, float, bool)) and k is not None:
                raise TypeError(f"save_checkpoint: {where} has a key {k!r} of type {type(k).__name__}; "
                                f"JSON keys are strings")
            out[k] = _plain(v, f"{where}[{k!r}]")
        return out
    what = f"an array of shape {value.shape}" if isinstance(value, np.ndarray) else f"a {type(value).__name__}"
    raise TypeError(f"save_checkpoint: {where} is {what}, which JSON cannot hold (extra takes numbers, strings, "
                    f"bools, None, lists and dicts; save arrays as part of a model or convert them with .tolist())")


def _meta_json(path, meta: dict, key: str, kind=dict):
    """``meta[key]`` parsed, as a ``kind``: an edited or foreign file fails here as a ValueError naming
    the file and the key, not as a bare KeyError, a JSON error or a RecursionError."""
    if key not in meta:
        raise ValueError(f"{path}: the checkpoint's metadata has no {key!r} entry (the file was not written by "
                         f"save_checkpoint, or was edited)")
    try:
        value = json.loads(meta[key])
    except ValueError as e:
        raise ValueError(f"{path}: the checkpoint's {key!r} metadata is not valid JSON: {e}") from None
    except RecursionError:
        raise ValueError(f"{path}: the checkpoint's {key!r} metadata is nested too deeply to be checkpoint "
                         f"state") from None
    if not isinstance(value, kind):
        raise ValueError(f"{path}: the checkpoint's {key!r} metadata must be a JSON "
                         f"{'object' if kind is dict else kind.__name__}, got {type(value).__name__}")
    return value


def save_checkpoint(path, *, model=None, optimizer=None, scheduler=None, step=None, extra=None) -> None:
    """Write everything given to ``path`` (temp file + rename: a failed save leaves the old file).

    ``extra``: your own JSON values (numpy scalars are stored as their Python values); ``load_checkpoint``
    returns it."""
    extra = _plain(extra if extra is not None else {}, "extra")  # before anything is written
    tensors, dtypes, meta = {}, {}, {"format": FORMAT}
    if model is not None:
        for (name, arr), d in zip(model.state_dict().items(), model.state_dtypes().values()):
            tensors[f"model.{name}"], dtypes[f"model.{name}"] = arr, d
    if optimizer is not None:
        sd = optimizer.state_dict()
        for k, arr in sd["arrays"].items():
            tensors[f"optim.{k}"] = arr
        meta["optimizer"] = json.dumps({k: v for k, v in sd.items() if k != "arrays"})
    if scheduler is not None:
        meta["scheduler"] = json.dumps(scheduler.state_dict())
    if step is not None:
        sd = step.state_dict()
        for k, arr in sd["arrays"].items():
            tensors[f"step.{k}"] = arr
        meta["step"] = json.dumps({k: v for k, v in sd.items() if k != "arrays"})
    meta["extra"] = json.dumps(extra)
    save_file(tensors, path, metadata=meta, dtypes=dtypes)


def load_checkpoint(path, *, model=None, optimizer=None, scheduler=None, step=None) -> dict:
    """Restore what is given from ``path`` (model names and shapes checked strictly); returns
    ``extra``. Restore into the same kind of objects that were saved (an AdamW's state into an
    AdamW). Any problem, in the file or in a mismatch with what is given, is a ValueError naming
    the file, raised before anything is changed."""

    def is_checkpoint(meta):  # before the tensors are read: another kind of file is refused at once
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path}: not a luminal checkpoint (format {meta.get('format')!r})")

    tensors, meta = load_with_metadata(path, check=is_checkpoint)  # one read: two could see two files

    def section(prefix):
        return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}

    for name, obj in (("optimizer", optimizer), ("scheduler", scheduler), ("step", step)):
        if obj is not None and name not in meta:
            raise ValueError(f"{path}: the checkpoint has no {name} state")
    applies = []  # every part is checked and converted before any is written: all or nothing
    parts = [(name, obj) for name, obj in (("optimizer", optimizer), ("step", step)) if obj is not None]
    try:
        if model is not None:
            applies.append(model.prepare_load(section("model."))[0])
    except (ValueError, TypeError, OverflowError) as e:
        raise ValueError(f"{path}: {e}") from None
    for name, obj in parts:
        sd = {**_meta_json(path, meta, name), "arrays": section("optim." if name == "optimizer" else "step.")}
        try:
            applies.append(obj.prepare_load(sd))
        except KeyError as e:
            raise ValueError(f"{path}: the checkpoint's {name!r} metadata has no {e} entry") from None
        except (ValueError, TypeError, OverflowError) as e:
            raise ValueError(f"{path}: {e}") from None
    if scheduler is not None:
        prepare = getattr(scheduler, "prepare_load", None)
        if prepare is None:  # its load could fail after the rest was written
            raise TypeError(f"load_checkpoint: scheduler must be a luminal scheduler (train.LRScheduler), got "
                            f"{type(scheduler).__name__}")
        try:
            applies.append(prepare(_meta_json(path, meta, "scheduler")))
        except (ValueError, TypeError, OverflowError) as e:
            raise ValueError(f"{path}: {e}") from None
    extra = _meta_json(path, meta, "extra", object)
    with interrupts_deferred():  # every part or none: a Ctrl-C is raised after the last
        for apply in applies:
            apply()
    return extra
