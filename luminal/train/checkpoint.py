"""Checkpoints: model, optimizer state, scheduler, step runner (and your own values) in one
safetensors file, written atomically, so that a resumed run continues exactly like one that did
not stop.

Arrays are tensors named ``model.<name>``, ``optim.<key>`` and ``step.<key>``; everything else
(optimizer step count and hyperparameters, scheduler state, the graph's random generator, ``extra``)
is JSON in the file's metadata.
"""

from __future__ import annotations

import json

from luminal.core.safetensors_io import load_file, load_metadata, save_file

FORMAT = "luminal-checkpoint/1"


def save_checkpoint(path, *, model=None, optimizer=None, scheduler=None, step=None, extra=None) -> None:
    """Write everything given to ``path`` (temp file + rename: a failed save leaves the old file)."""
    tensors, dtypes, meta = {}, {}, {"format": FORMAT}
    if model is not None:
        for (name, arr), d in zip(model.state_dict().items(), model.state_dtypes().values()):
            tensors[f"model.{name}"], dtypes[f"model.{name}"] = arr, d
    if optimizer is not None:
        sd = optimizer.state_dict()
        for k, arr in sd["arrays"].items():
            tensors[f"optim.{k}"] = arr
        meta["optimizer"] = json.dumps({"steps": sd["steps"], "param_groups": sd["param_groups"]})
    if scheduler is not None:
        meta["scheduler"] = json.dumps(scheduler.state_dict())
    if step is not None:
        sd = step.state_dict()
        for k, arr in sd["arrays"].items():
            tensors[f"step.{k}"] = arr
        meta["step"] = json.dumps({k: v for k, v in sd.items() if k != "arrays"})
    meta["extra"] = json.dumps(extra if extra is not None else {})
    save_file(tensors, path, metadata=meta, dtypes=dtypes)


def load_checkpoint(path, *, model=None, optimizer=None, scheduler=None, step=None) -> dict:
    """Restore what is given from ``path`` (model names and shapes checked strictly); returns
    ``extra``. Restore into the same kind of objects that were saved."""
    meta = load_metadata(path)
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path}: not a luminal checkpoint (format {meta.get('format')!r})")
    tensors = load_file(path)

    def section(prefix):
        return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}

    for name, obj in (("optimizer", optimizer), ("scheduler", scheduler), ("step", step)):
        if obj is not None and name not in meta:
            raise ValueError(f"{path}: the checkpoint has no {name} state")
    applies = []  # every part is checked and converted before any is written: all or nothing
    try:
        if model is not None:
            applies.append(model.prepare_load(section("model."))[0])
        if optimizer is not None:
            applies.append(optimizer.prepare_load({**json.loads(meta["optimizer"]), "arrays": section("optim.")}))
        if step is not None:
            applies.append(step.prepare_load({**json.loads(meta["step"]), "arrays": section("step.")}))
        extra = json.loads(meta["extra"])
        sched = json.loads(meta["scheduler"]) if scheduler is not None else None
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: {e}") from None
    for apply in applies:
        apply()
    if scheduler is not None:
        scheduler.load_state_dict(sched)
    return extra
