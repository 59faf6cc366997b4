"""Loops kept as loops: steps a trace ran one after another, proven one program, become
one loop node holding one step's graph (rules/loops.py), so the code runs `for` over them
instead of repeating the step. See roll.py."""

from .roll import ENABLED, USER_LOOPS, roll

__all__ = ["ENABLED", "USER_LOOPS", "roll"]
