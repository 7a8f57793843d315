// libFuzzer target: any --gpu value either parses into entries that keep the parser's promises,
// or fails with gpusel::Error. Anything else (a crash, another exception, a broken promise) is a
// finding.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gpusel/error.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string value(reinterpret_cast<const char*>(data), size);
  try {
    const auto entries = gpusel::parse_gpu_spec(value);
    if (entries.empty()) std::abort();
    const bool uuids = gpusel::is_gpu_uuid(entries.front());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (gpusel::is_gpu_uuid(entries[i]) != uuids) std::abort();
      if (!uuids && !gpusel::is_gpu_index(entries[i])) std::abort();
      if (uuids && entries[i].compare(0, 4, "GPU-") != 0) std::abort();
      for (std::size_t j = 0; j < i; ++j) {
        if (gpusel::detail::same_entry(entries[i], entries[j])) std::abort();
      }
    }
    const std::string single = gpusel::parse_single_gpu(value);
    if (entries.size() != 1 || single != entries.front()) std::abort();
  } catch (const gpusel::Error&) {
  }
  return 0;
}
