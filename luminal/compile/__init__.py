"""The compiler entry point. Until the egglog compiler lands, every CPU backend runs the reference
interpreter; the call contract (inputs by name, validation before work, outputs as arrays) is final."""

from .api import Compiled, compile

__all__ = ["Compiled", "compile"]
