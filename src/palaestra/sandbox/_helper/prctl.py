"""``prctl(2)`` through ``_ctypes`` alone.

The ``ctypes`` package would cost every sandbox's start about 1.5 ms (it builds dozens of types
and imports ``struct``, ``types`` and its own modules); the helper needs one foreign function,
so it makes that one from the extension module underneath.
"""

from __future__ import annotations

import _ctypes
import os

PR_SET_PDEATHSIG, PR_GET_PDEATHSIG, PR_SET_DUMPABLE = 1, 2, 4
byref = _ctypes.byref


class Int(_ctypes._SimpleCData):
    """A C ``int`` (ctypes' ``c_int``)."""

    _type_ = "i"


class _Function(_ctypes.CFuncPtr):
    _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
    _restype_ = Int


class _Process:
    """The symbols already loaded into this process (what ``ctypes.CDLL(None)`` wraps)."""

    _handle = _ctypes.dlopen(None)


_prctl = _Function(("prctl", _Process()))


def prctl(option: int, arg: object = 0) -> int:
    """``prctl(option, arg, 0, 0, 0)``; ``arg`` may be ``byref(Int())`` for a result. Raises
    OSError on failure."""
    result = _prctl(option, arg, 0, 0, 0)
    if result == -1:
        err = _ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result
