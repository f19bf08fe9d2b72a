"""Give memory freed by closed persona streams back to the operating system.

A persona stream's cache is a handful of numpy columns. When the service's pool closes a
persona, Python and numpy free them, but glibc's allocator keeps freed blocks inside the
process when other live allocations sit above them in the heap: measured on a server given
10 memories for each of 1,000 new personas with 64 kept open, resident memory grew by
430 MB, of which collecting the closed caches and ``malloc_trim`` handed 280 MB back.
:func:`release_freed_memory` asks glibc for that; elsewhere (musl, macOS, Windows) it does
nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import sys
from typing import Any

__all__ = ["release_freed_memory"]


@functools.cache
def _trim() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_freed_memory() -> bool:
    """Free unreachable objects, then return the allocator's free memory to the system.

    A closed stream's cache refers to itself (its lazy node list points back at it), so its
    columns are freed by the cycle collector, not at once; they are collected first, then
    glibc's ``malloc_trim(0)`` gives the free memory back.

    Returns:
        True when glibc released some memory; False when it had none to release or the
        allocator is not glibc's.
    """
    trim = _trim()
    if trim is None:
        return False
    gc.collect()
    return bool(trim(0))
