"""gpusel for Python: the reference module's API (gpu_select) over libgpusel's C ABI, via ctypes.

Switching a program over is one line:

    import gpusel as gpu_select          # was: import gpu_select

Importing this module loads libgpusel (found through GPUSEL_LIBRARY, next to this package, in
the installation prefix above it, or on the loader path) and never initialises CUDA. Errors raise
ValueError (bad input) and RuntimeError (anything else) with libgpusel's messages.
"""

from __future__ import annotations

import argparse
import ctypes
import os
from typing import Sequence

__all__ = [
    "UUID_PREFIX", "is_gpu_uuid", "is_gpu_index", "parse_gpu_spec", "gpu_arg", "single_gpu_arg",
    "resolve_gpu_uuids", "set_assigned_gpu", "assign_gpu", "bind_assigned_gpu", "assigned_visible_gpu",
    "format_gpu_uuid", "gpu_identity", "library_path",
]

UUID_PREFIX = "GPU-"
_OK, _FAILURE, _BAD_INPUT, _TOO_SMALL = 0, 1, 2, 3


class _Identity(ctypes.Structure):
    _fields_ = [("index", ctypes.c_int), ("cuda_ordinal", ctypes.c_int), ("uuid", ctypes.c_char * 96),
                ("name", ctypes.c_char * 256), ("total_bytes", ctypes.c_ulonglong), ("cc_major", ctypes.c_int),
                ("cc_minor", ctypes.c_int), ("pci_bus_id", ctypes.c_char * 32)]


def _candidates():
    explicit = os.environ.get("GPUSEL_LIBRARY")
    if explicit:
        yield explicit
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libgpusel.so.0")
    # Installed: <prefix>/lib[/<arch>]/python3/dist-packages/gpusel -> <prefix>/lib[/<arch>]
    d = here
    for _ in range(5):
        d = os.path.dirname(d)
        for sub in ("", "lib"):
            yield os.path.join(d, sub, "libgpusel.so.0")
    yield "libgpusel.so.0"


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as exc:
            tried.append(f"{path} ({exc})")
    raise ImportError("gpusel: cannot find libgpusel.so.0; set GPUSEL_LIBRARY to its path "
                      "(tried: " + "; ".join(tried) + ")")


_lib, library_path = _load()
_lib.gpusel_last_error.restype = ctypes.c_char_p
_lib.gpusel_version.restype = ctypes.c_char_p
__version__ = _lib.gpusel_version().decode()
_STRING_CALLS = {"gpusel_parse_gpu_spec", "gpusel_parse_single_gpu"}


def _message():
    return _lib.gpusel_last_error().decode("utf-8", "replace")


def _check(status, errors=ValueError):
    """Raises for a failed call: `errors` for bad input, RuntimeError for other failures."""
    if status == _OK:
        return
    raise (errors if status == _BAD_INPUT else RuntimeError)(_message())


def _encode(value: str) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"expected a str, got {type(value).__name__}")
    if "\0" in value:
        raise ValueError(f"{value!r} contains a NUL character")
    return value.encode("utf-8", "surrogateescape")


def _string_call(name, value, *extra):
    fn = getattr(_lib, name)
    size = ctypes.c_size_t(256)
    while True:
        buf = ctypes.create_string_buffer(size.value)
        status = fn(_encode(value), buf, size, ctypes.byref(size), *extra)
        if status != _TOO_SMALL:
            _check(status)
            return buf.value.decode()


def is_gpu_uuid(spec: str) -> bool:
    return bool(_lib.gpusel_is_gpu_uuid(_encode(spec)))


def is_gpu_index(spec: str) -> bool:
    return bool(_lib.gpusel_is_gpu_index(_encode(spec)))


def parse_gpu_spec(value: str) -> tuple[str, ...]:
    """Split a --gpu value into canonical entries; ValueError on a bad value."""
    return tuple(_string_call("gpusel_parse_gpu_spec", value).split(","))


def gpu_arg(value: str) -> tuple[str, ...]:
    """argparse type for a --gpu list."""
    try:
        return parse_gpu_spec(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def single_gpu_arg(value: str) -> str:
    """argparse type for a --gpu that takes exactly one GPU."""
    try:
        return _string_call("gpusel_parse_single_gpu", value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def resolve_gpu_uuids(specs: Sequence[str]) -> "tuple[str, ...] | None":
    """--gpu entries -> full GPU UUIDs, one per rank; None when NVML is unavailable."""
    if isinstance(specs, str):
        specs = [specs]
    resolved = ctypes.c_int(0)
    out = _string_call_resolve(",".join(specs), resolved)
    return tuple(out.split(",")) if resolved.value else None


def _string_call_resolve(value, resolved):
    size = ctypes.c_size_t(1024)
    while True:
        buf = ctypes.create_string_buffer(size.value)
        status = _lib.gpusel_resolve(_encode(value), buf, size, ctypes.byref(size), ctypes.byref(resolved))
        if status != _TOO_SMALL:
            _check(status)
            return buf.value.decode()


def set_assigned_gpu(target: str) -> None:
    """Publish this process's GPU before CUDA init; a different GPU later is a RuntimeError."""
    _check(_lib.gpusel_set_assigned_gpu(_encode(target)), RuntimeError)


def assign_gpu(spec: "str | None") -> None:
    """Resolve one --gpu value and publish it; nothing when the flag was not given."""
    if spec is None:
        return
    _check(_lib.gpusel_assign_gpu(_encode(spec)))


def _bind(default: int) -> int:
    ordinal = ctypes.c_int(-1)
    _check(_lib.gpusel_bind_assigned_gpu(int(default), ctypes.byref(ordinal)), RuntimeError)
    return ordinal.value


def bind_assigned_gpu(default: int = 0):
    """Bind this process's GPU (its primary context becomes current) and return it: a torch.device
    after torch.cuda.set_device when torch is installed, else the CUDA ordinal."""
    ordinal = _bind(default)
    try:
        import torch  # imported only now, never at module import
    except ImportError:
        return ordinal
    device = torch.device("cuda", ordinal)
    torch.cuda.set_device(device)
    return device


def assigned_visible_gpu() -> "int | None":
    """The CUDA ordinal this process is (or will be) bound to; None before it publishes or binds."""
    ordinal = ctypes.c_int(-1)
    _check(_lib.gpusel_assigned_visible_gpu(ctypes.byref(ordinal)), RuntimeError)
    return None if ordinal.value < 0 else ordinal.value


def format_gpu_uuid(raw) -> "str | None":
    """nvidia-smi form GPU-<uuid> from a uuid.UUID (or its string)."""
    return None if raw is None else f"{UUID_PREFIX}{raw}"


def gpu_identity(index: int) -> dict:
    """{index, name, uuid, total_bytes} of visible device `index` (a CUDA ordinal)."""
    ident = _Identity()
    _check(_lib.gpusel_gpu_identity(int(index), ctypes.byref(ident)), RuntimeError)
    return {
        "index": index,
        "name": ident.name.decode(),
        "uuid": ident.uuid.decode(),
        "total_bytes": int(ident.total_bytes),
    }
