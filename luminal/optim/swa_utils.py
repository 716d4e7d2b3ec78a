"""torch.optim.swa_utils's names: ``luminal.train.swa_utils`` (``AveragedModel``, ``SWALR``, ``update_bn``
and the averaging functions), the same objects."""

from luminal.train.swa_utils import *  # noqa: F403 - torch's names, listed once in train/swa_utils
from luminal.train.swa_utils import __all__  # noqa: F401 - re-exported as this module's public names
