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
import sys
import sysconfig
import warnings
from typing import Sequence

__all__ = [
    "UUID_PREFIX", "is_gpu_uuid", "is_gpu_index", "parse_gpu_spec", "gpu_arg", "single_gpu_arg",
    "resolve_gpu_uuids", "set_assigned_gpu", "assign_gpu", "assign_from_environment", "bind_assigned_gpu",
    "assigned_visible_gpu", "assignment_source", "local_rank", "format_gpu_uuid", "gpu_identity",
    "library_path", "ClaimWarning", "list_gpus",
]

UUID_PREFIX = "GPU-"
_OK, _FAILURE, _BAD_INPUT, _TOO_SMALL = 0, 1, 2, 3


class _Identity(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("nvidia_smi_index", ctypes.c_int), ("cuda_ordinal", ctypes.c_int), ("uuid", ctypes.c_char * 96),
                ("name", ctypes.c_char * 256), ("total_bytes", ctypes.c_ulonglong), ("cc_major", ctypes.c_int),
                ("cc_minor", ctypes.c_int), ("pci_bus_id", ctypes.c_char * 32)]


# Windows: gpusel.dll, looked for only by absolute path (beside this package, else in the
# installation's bin folder at the install's known depth), never through the DLL search path nor
# in folders further up (C:\gpusel.dll and the like could be planted by anyone).
_LIBRARY = "gpusel.dll" if os.name == "nt" else "libgpusel.so.2"


def _candidates():
    explicit = os.environ.get("GPUSEL_LIBRARY")
    if explicit:
        if os.name == "nt" and not os.path.isabs(explicit):
            raise ImportError(f"gpusel: GPUSEL_LIBRARY={explicit!r} is not an absolute path; on "
                              "Windows give the full path of gpusel.dll (C:\\...\\gpusel.dll)")
        # A relative path is made absolute now, against the directory it was meant for: the
        # library finds its probe helper from the path it was loaded by, and takes only an
        # absolute one (a relative one would be read against whatever directory is current then).
        yield os.path.abspath(explicit) if os.sep in explicit else explicit
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, _LIBRARY)
    if os.name == "nt":
        # Installed: <prefix>\lib\python3.X\dist-packages\gpusel -> <prefix>\bin, and only there.
        prefix = here
        for _ in range(4):
            prefix = os.path.dirname(prefix)
        yield os.path.join(prefix, "bin", _LIBRARY)
        return
    # Installed: <prefix>/lib[/<arch>]/python3[.X]/dist-packages/gpusel -> <prefix>/lib[/<arch>],
    # <arch> being Debian's multiarch folder (x86_64-linux-gnu).
    arch = sysconfig.get_config_var("MULTIARCH") or ""
    subs = ("", "lib") + ((arch, os.path.join("lib", arch)) if arch else ())
    d = here
    for _ in range(5):
        d = os.path.dirname(d)
        for sub in subs:
            yield os.path.join(d, sub, _LIBRARY)
    yield _LIBRARY


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
    raise ImportError(f"gpusel: cannot find {_LIBRARY}; set GPUSEL_LIBRARY to its path "
                      "(tried: " + "; ".join(tried) + ")")


_lib, library_path = _load()

# Every C function gets its prototype: without one, ctypes passes Python ints as C ints with their
# high bits silently dropped (2**32 + 5 would arrive as 5).
_int_p = ctypes.POINTER(ctypes.c_int)
_size_p = ctypes.POINTER(ctypes.c_size_t)
_PROTOTYPES = {
    "gpusel_version": (ctypes.c_char_p, []),
    "gpusel_last_error": (ctypes.c_char_p, []),
    "gpusel_last_error_code": (ctypes.c_int, []),
    "gpusel_last_error_call": (ctypes.c_char_p, [ctypes.POINTER(ctypes.c_longlong)]),
    "gpusel_last_error_subject": (ctypes.c_char_p, []),
    "gpusel_last_error_field_name": (ctypes.c_char_p, [ctypes.c_size_t]),
    "gpusel_last_error_field": (ctypes.c_char_p, [ctypes.c_char_p]),
    "gpusel_is_gpu_uuid": (ctypes.c_int, [ctypes.c_char_p]),
    "gpusel_is_gpu_index": (ctypes.c_int, [ctypes.c_char_p]),
    "gpusel_parse_gpu_spec": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, _size_p]),
    "gpusel_parse_single_gpu": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, _size_p]),
    "gpusel_resolve": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, _size_p, _int_p]),
    "gpusel_set_assigned_gpu": (ctypes.c_int, [ctypes.c_char_p]),
    "gpusel_assign_gpu": (ctypes.c_int, [ctypes.c_char_p]),
    "gpusel_assign_from_environment": (ctypes.c_int, [_int_p]),
    "gpusel_assignment_source": (ctypes.c_int, [_int_p, _int_p]),
    "gpusel_local_rank": (ctypes.c_int, [_int_p]),
    "gpusel_bind_assigned_gpu": (ctypes.c_int, [ctypes.c_int, _int_p]),
    "gpusel_assigned_visible_gpu": (ctypes.c_int, [_int_p]),
    "gpusel_gpu_identity": (ctypes.c_int, [ctypes.c_int, ctypes.c_void_p]),
    "gpusel_claim_note": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, _size_p]),
    "gpusel_set_stderr_warnings": (None, [ctypes.c_int]),
    "gpusel_list_gpus_with": (ctypes.c_int, [ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p)]),
    "gpusel_gpu_list_count": (ctypes.c_size_t, [ctypes.c_void_p]),
    "gpusel_gpu_list_free": (None, [ctypes.c_void_p]),
    "gpusel_gpu_field_name": (ctypes.c_char_p, [ctypes.c_size_t]),
    "gpusel_gpu_field_kind": (ctypes.c_int, [ctypes.c_size_t]),
    "gpusel_gpu_list_field": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_char_p,
                                             ctypes.c_size_t, _size_p, _int_p]),
}
for _name, (_restype, _argtypes) in _PROTOTYPES.items():
    _fn = getattr(_lib, _name)
    _fn.restype = _restype
    _fn.argtypes = _argtypes
__version__ = _lib.gpusel_version().decode()
# A bind without a claim is said as a Python warning (ClaimWarning), not by the library on stderr.
_lib.gpusel_set_stderr_warnings(0)
_SOURCES = ("code", "GPUSEL_GPU", "GPUSEL_GPUS", "launcher", "single", "default")


def _message():
    return _lib.gpusel_last_error().decode("utf-8", "replace")


def _check(status, errors=ValueError):
    """Raises for a failed call: `errors` for bad input, RuntimeError for other failures. The
    exception carries the failure as data: `code` (the C ABI's GPUSEL_ERROR_* number), `call` (the
    NVIDIA driver function that failed, "" when none did), `result` (what it returned), `subject`
    (what the failure is about: "gpu-entry", "cuda-visible-devices" ..., "" for nothing in
    particular) and `fields` (a dict of its named values: the entry as given, a stable "reason")."""
    if status == _OK:
        return
    exc = (errors if status == _BAD_INPUT else RuntimeError)(_message())
    result = ctypes.c_longlong(0)
    exc.call = _lib.gpusel_last_error_call(ctypes.byref(result)).decode("utf-8", "replace")
    exc.result = result.value
    exc.code = _lib.gpusel_last_error_code()
    exc.subject = _lib.gpusel_last_error_subject().decode("utf-8", "replace")
    exc.fields = {}
    i = 0
    while (name := _lib.gpusel_last_error_field_name(i)) is not None:
        value = _lib.gpusel_last_error_field(name)
        exc.fields[name.decode("utf-8", "replace")] = value.decode("utf-8", "surrogateescape")
        i += 1
    raise exc


def _encode(value: str) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"expected a str, got {type(value).__name__}")
    if "\0" in value:
        raise ValueError(f"{value!r} contains a NUL character")
    return value.encode("utf-8", "surrogateescape")


def _c_int(value, what: str) -> int:
    """`value` as a C int, refused (ValueError) when it is not an int or does not fit."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}")
    if not -(2**31) <= value < 2**31:
        raise ValueError(f"{what} {value} is out of range (a CUDA ordinal is a small non-negative int)")
    return value


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


def assign_from_environment() -> "str | None":
    """Publish GPUSEL_GPU, else this rank's entry of GPUSEL_GPUS (chosen by the innermost launcher's
    local rank); returns "GPUSEL_GPU" or "GPUSEL_GPUS", or None when neither is set (nothing is
    published). ValueError for a malformed value, a rank past the list, or ranks that disagree."""
    rank = ctypes.c_int(-1)
    _check(_lib.gpusel_assign_from_environment(ctypes.byref(rank)))
    source = assignment_source()
    return None if source is None else source[0]


def assignment_source() -> "tuple[str, int | None] | None":
    """How this process's GPU was decided: (source, local rank or None), where source is one of
    "code", "GPUSEL_GPU", "GPUSEL_GPUS", "launcher", "single", "default"; None before anything is
    published or bound."""
    source, rank = ctypes.c_int(-1), ctypes.c_int(-1)
    _check(_lib.gpusel_assignment_source(ctypes.byref(source), ctypes.byref(rank)), RuntimeError)
    if source.value < 0:
        return None
    return _SOURCES[source.value], (None if rank.value < 0 else rank.value)


def local_rank() -> "int | None":
    """The local rank of the launcher that started this process, or None when none set one."""
    rank = ctypes.c_int(-1)
    _check(_lib.gpusel_local_rank(ctypes.byref(rank)))
    return None if rank.value < 0 else rank.value


class ClaimWarning(RuntimeWarning):
    """This process bound its GPU without a claim (its lease store could not be used), so another
    process may bind the same GPU: set GPUSEL_LEASE_DIR to a folder of yours, or have root run
    `gpusel setup`."""


def _claim_note() -> str:
    size = ctypes.c_size_t(256)
    while True:
        buf = ctypes.create_string_buffer(size.value)
        status = _lib.gpusel_claim_note(buf, size, ctypes.byref(size))
        if status != _TOO_SMALL:
            _check(status, RuntimeError)
            return buf.value.decode("utf-8", "replace")


def _bind(default: int) -> int:
    ordinal = ctypes.c_int(-1)
    _check(_lib.gpusel_bind_assigned_gpu(_c_int(default, "default"), ctypes.byref(ordinal)), RuntimeError)
    note = _claim_note()
    if note:
        warnings.warn(f"device {ordinal.value} was bound, but {note}; another process may bind "
                      "the same GPU. Set GPUSEL_LEASE_DIR to a folder of yours, or have root run "
                      "`gpusel setup`", ClaimWarning, stacklevel=3)
    return ordinal.value


def bind_assigned_gpu(default: int = 0):
    """Bind this process's GPU (its primary context becomes current) and return it.

    With nothing published, the same rule as in C++ decides: GPUSEL_GPU, GPUSEL_GPUS and the local
    rank, a launcher's local rank among several visible devices, the only visible device, and
    `default` only where no launcher started this process.

    No framework is ever imported here. When the program has already imported torch (it is in
    sys.modules) and that torch can use CUDA, torch is told as well (torch.cuda.set_device) and a
    torch.device is returned; otherwise the CUDA ordinal (an int). The binding itself is torch's
    too either way: the primary context current on this thread is what the CUDA runtime uses.

    In a HIP program (AMD GPUs: HIP already loaded, as `import torch` of a ROCm build does) the
    GPU is chosen among HIP's devices and made HIP's current device; the number is its HIP ordinal,
    which torch.cuda uses there too."""
    ordinal = _bind(default)
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "cuda"):
        return ordinal
    if not torch.cuda.is_available():  # a CPU-only build: the driver-level binding stands alone
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
    """{index, cuda_ordinal, nvidia_smi_index, name, uuid, total_bytes, compute_capability,
    pci_bus_id} of visible device `index`
    (a CUDA ordinal; "index" is that ordinal, as in the reference module); docs/python.md describes
    each key."""
    ident = _Identity(size=ctypes.sizeof(_Identity))
    _check(_lib.gpusel_gpu_identity(_c_int(index, "index"), ctypes.byref(ident)), RuntimeError)
    return {
        # "index" keeps the reference module's meaning, the CUDA ordinal; the two numberings are
        # also given under names that say which they are.
        "index": index,
        "cuda_ordinal": index,
        "nvidia_smi_index": None if ident.nvidia_smi_index < 0 else int(ident.nvidia_smi_index),
        "name": ident.name.decode(),
        "uuid": ident.uuid.decode(),
        # "total_bytes" is the reference module's key; "memory_total_bytes" the name gpusel gives
        # the field everywhere else (list --json, list_gpus).
        "total_bytes": int(ident.total_bytes),
        "memory_total_bytes": int(ident.total_bytes),
        "compute_capability": None if ident.cc_major < 0 else (int(ident.cc_major), int(ident.cc_minor)),
        "pci_bus_id": ident.pci_bus_id.decode() or None,
    }


def _gpu_fields():
    """[(name, kind)] of the library's field table; kind 0 text, 1 number, 2 flag."""
    fields, k = [], 0
    while True:
        name = _lib.gpusel_gpu_field_name(k)
        if name is None:
            return fields
        fields.append((name.decode(), _lib.gpusel_gpu_field_kind(k)))
        k += 1


def _gpu_field(lst, i, name):
    size, present = ctypes.c_size_t(256), ctypes.c_int(0)
    while True:
        buf = ctypes.create_string_buffer(size.value)
        status = _lib.gpusel_gpu_list_field(lst, i, name.encode(), buf, size, ctypes.byref(size),
                                            ctypes.byref(present))
        if status != _TOO_SMALL:
            _check(status, RuntimeError)
            return buf.value.decode("utf-8", "replace") if present.value else None


def list_gpus(usage: bool = False) -> list:
    """Every GPU NVML lists, in nvidia-smi order: one dict each, keyed by the field names of
    `gpusel list --json` (None where NVML gave nothing); with `usage`, also what changes as a GPU
    is used (memory_used_bytes, utilization_percent, ...). Where NVML is unavailable and ROCm SMI
    lists AMD GPUs, those, in rocm-smi order (vendor "amd", rocm_smi_index, hip_ordinal; NVIDIA's
    own fields None). Never initialises CUDA; RuntimeError when neither can be read."""
    lst = ctypes.c_void_p()
    _check(_lib.gpusel_list_gpus_with(1 if usage else 0, ctypes.byref(lst)), RuntimeError)
    try:
        fields = _gpu_fields()
        gpus = []
        for i in range(_lib.gpusel_gpu_list_count(lst)):
            gpu = {}
            for name, kind in fields:
                text = _gpu_field(lst, i, name)
                gpu[name] = text if text is None or kind == 0 else (int(text) if kind == 1 else text == "1")
            gpus.append(gpu)
        return gpus
    finally:
        _lib.gpusel_gpu_list_free(lst)
