// The rule for the C ABI's caller-sized structs (gpusel_gpu_info, gpusel_identity), in one place:
// private to src/capi (and its unit test).
//
// A caller's struct starts with `size_t size`, which the caller sets to sizeof the struct it was
// compiled with. The library trusts that number only as an upper bound: it writes the bytes after
// `size` up to the smaller of the caller's size and the end of the last field it knows, and
// nothing beyond. (Not up to its own sizeof: the trailing padding of one version is where the next
// version's first new field may go.) A newer caller's fields the library does not know keep what
// the caller put there; an older caller's struct ends where the caller says. `size` itself is
// never written.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace gpusel::detail {

// The `size` the caller wrote at the start of its struct `out` (read bytewise: the caller's struct
// may be shorter than the library's, so no member of the library's type is read through it).
inline std::size_t caller_struct_size(const void* out) {
  std::size_t size = 0;
  std::memcpy(&size, out, sizeof size);
  return size;
}

// Copies the library's filled struct `value` (whose fields end `fields_end` bytes from its start,
// its own `size` first) into the caller's `out`: the bytes [sizeof(size_t), min(caller's size,
// fields_end)). Returns the number of bytes of `out` now valid, the caller's `size` included.
inline std::size_t copy_sized_struct(void* out, const void* value, std::size_t fields_end) {
  const std::size_t limit = std::min(caller_struct_size(out), fields_end);
  if (limit <= sizeof(std::size_t)) return limit;
  std::memcpy(static_cast<unsigned char*>(out) + sizeof(std::size_t),
              static_cast<const unsigned char*>(value) + sizeof(std::size_t),
              limit - sizeof(std::size_t));
  return limit;
}

}  // namespace gpusel::detail
