"""A host array with at most one device copy: the bookkeeping of resident state (``State`` is one).

A device backend keeps a State's values on the device between calls, one copy shared by every
program that reads it, so a training step moves the batch and the loss, not the weights. Which copy
holds the latest values is tracked here, in the core, because the State lives in the frontend and
the backends may not import it:

- the device copy is current after a program wrote it (:meth:`Mirrored.written_on_device`) or an
  upload (:meth:`Mirrored.uploaded`); the host copy is then stale until read;
- reading ``.data`` downloads once (when the host copy is stale) and makes the host copy
  authoritative: the caller may write into the array it got (``np.copyto(p.data, v)``,
  ``p.data[0] = 0``), which nothing can observe, so the next program call uploads it. Assigning
  ``.data`` or ``set`` does the same without a download.

So a held reference to ``.data`` sees device updates only when ``.data`` is read again (the download
writes into the same array in place). A device copy is any object with ``download(host)`` (bring its
values into the host array, synchronously) and ``release()`` (free it).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Mirrored:
    """The host side of a value that a device may hold a copy of (module docstring)."""

    _host: np.ndarray
    _device_copy: Any = None  # the device copy, or None
    _host_current = True  # the host array holds the latest values
    _device_current = False  # the device copy holds the latest values

    @property
    def data(self) -> np.ndarray:
        """The values as a host array (downloaded first when a device wrote them); the caller may
        write into it: the next device call uploads it."""
        host = self.host_array()
        self._device_current = False
        return host

    @data.setter
    def data(self, value: np.ndarray) -> None:
        self._host = value
        self._host_current, self._device_current = True, False

    def host_array(self) -> np.ndarray:
        """The current values for reading (downloaded when stale), leaving the device copy current."""
        if not self._host_current:
            self._device_copy.download(self._host)
            self._host_current = True
        return self._host

    def host_overwritten(self) -> None:
        """The whole host array was just replaced in place: it is authoritative, nothing to download."""
        self._host_current, self._device_current = True, False

    @property
    def device_copy(self):
        """The device copy a backend keeps of these values (None: only the host holds them)."""
        return self._device_copy

    @property
    def device_current(self) -> bool:
        """Whether the device copy holds the latest values (a program may read it without an upload)."""
        return self._device_copy is not None and self._device_current

    def mirror(self, copy) -> None:
        """Make ``copy`` the device copy (holding nothing yet: the next use uploads); a previous copy is
        read back first if it held the latest values, then released."""
        old = self._device_copy
        if old is not None:
            self.host_array()
            old.release()
        self._device_copy, self._device_current = copy, False

    def uploaded(self) -> None:
        """The device copy now holds the host values."""
        self._device_current = True

    def written_on_device(self) -> None:
        """A program wrote the device copy: it holds the latest values, the host array is stale."""
        self._device_current, self._host_current = True, False

    def __getstate__(self):
        """Pickled and copied (``copy.deepcopy``) as the host values alone: a device copy is this
        process's and this object's."""
        out = dict(self.__dict__)
        out["_host"] = self.host_array()
        for k in ("_device_copy", "_host_current", "_device_current"):
            out.pop(k, None)
        return out
