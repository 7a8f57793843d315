"""What tests/abi/check_nvml_header.py (gpusel's own NVML declarations) and
check_sim_nvml_header.py (the simulator's NVML exports) share: how types are compared with nvml.h's
by ABI (SAME_ABI, C++ to paste after `namespace ours { ... }` holding gpusel's declarations) and
where nvml.h comes from (fetch)."""

import fcntl
import os
import subprocess

SAME_ABI = r'''
// Whether NVIDIA's type T and gpusel's type U are the same to the ABI: the same type; integers of
// one size and signedness; a C enum of nvml.h and an integer of its size (a C enum is passed as an
// int; its signedness is the compiler's choice, not the ABI's); NVIDIA's device handle and structs
// and gpusel's copies of them (ours_of); and so on through const, pointers, arrays and function
// pointers.
template <typename T> struct ours_of { using type = void; };
template <> struct ours_of<::nvmlDevice_st> { using type = ours::gpuselNvmlDevice; };

template <typename T, typename U> constexpr bool same_abi();
template <typename R, typename... A, typename S, typename... B>
constexpr bool same_function(R (*)(A...), S (*)(B...)) {
  if constexpr (sizeof...(A) != sizeof...(B)) {
    return false;
  } else {
    return same_abi<R, S>() && (same_abi<A, B>() && ...);
  }
}
template <typename T, typename U>
constexpr bool same_abi() {
  if constexpr (std::is_same_v<T, U>) {
    return true;
  } else if constexpr (std::is_const_v<T> || std::is_const_v<U>) {
    return std::is_const_v<T> && std::is_const_v<U> &&
           same_abi<std::remove_const_t<T>, std::remove_const_t<U>>();
  } else if constexpr (std::is_pointer_v<T> && std::is_pointer_v<U>) {
    using PT = std::remove_pointer_t<T>;
    using PU = std::remove_pointer_t<U>;
    if constexpr (std::is_function_v<PT> && std::is_function_v<PU>) {
      return same_function(static_cast<T>(nullptr), static_cast<U>(nullptr));
    } else {
      return same_abi<PT, PU>();
    }
  } else if constexpr (std::is_array_v<T> && std::is_array_v<U>) {
    return std::extent_v<T> == std::extent_v<U> &&
           same_abi<std::remove_extent_t<T>, std::remove_extent_t<U>>();
  } else if constexpr (std::is_enum_v<T> && std::is_integral_v<U>) {
    return sizeof(T) == sizeof(U);
  } else if constexpr (std::is_integral_v<T> && std::is_integral_v<U>) {
    return sizeof(T) == sizeof(U) && std::is_signed_v<T> == std::is_signed_v<U>;
  } else if constexpr (std::is_class_v<T>) {
    return std::is_same_v<typename ours_of<T>::type, U>;
  } else {
    return false;
  }
}
'''


def fetch(source, extras):
    """nvml.h under EXTRAS, fetched with scripts/fetch-extras unless it is there; None offline."""
    header_dir = os.path.join(extras, "root", "usr", "include")
    if os.path.isfile(os.path.join(header_dir, "nvml.h")):
        return header_dir
    os.makedirs(extras, exist_ok=True)
    # One fetch at a time into one folder (ctest may run this beside another copy of itself).
    with open(os.path.join(extras, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.isfile(os.path.join(header_dir, "nvml.h")):
            r = subprocess.run([os.path.join(source, "scripts", "fetch-extras"), extras, "libnvidia-ml-dev"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(r.stdout + r.stderr)
                return None
    return header_dir if os.path.isfile(os.path.join(header_dir, "nvml.h")) else None
