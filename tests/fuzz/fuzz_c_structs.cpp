// libFuzzer target: the `size` field of every caller-sized struct of the C ABI (gpusel_identity
// through gpusel_gpu_identity, gpusel_gpu_info through gpusel_gpu_list_get), on the simulated
// dgx-h100. Whatever `size` claims, the library may write only the bytes after `size` up to
// min(size, the end of its struct's last field), and those must be what a caller of the right
// size gets. The caller's
// struct is a heap block of at most the library's size plus 64 bytes, so AddressSanitizer reports
// a write past it, and the bytes the library must not write are checked to be unchanged.
//
// Input: byte 0 chooses the struct (even: gpusel_identity, odd: gpusel_gpu_info); bytes 1-8 are
// the claimed size (little-endian; missing bytes are zero); byte 9 the CUDA ordinal or list index;
// byte 10 how many bytes past the library's struct the caller's block has (mod 65).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "gpusel/gpusel.h"

namespace {

constexpr int kGpus = 8;  // dgx-h100
constexpr unsigned char kUntouched = 0xa5;

gpusel_gpu_list* the_list = nullptr;
std::optional<gpusel_identity> identities[kGpus];
std::optional<gpusel_gpu_info> infos[kGpus];

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_c_structs: %s (last error: %s)\n", what, gpusel_last_error());
  std::abort();
}

gpusel_status call(bool identity, int which, void* out) {
  if (identity) return gpusel_gpu_identity(which, static_cast<gpusel_identity*>(out));
  return gpusel_gpu_list_get(the_list, static_cast<std::size_t>(which),
                             static_cast<gpusel_gpu_info*>(out));
}

// The first version of each struct (gpusel 0.1) ends with these fields, and so does this
// library's (update the second pair when a field is appended).
constexpr std::size_t kIdentityFirst =
    offsetof(gpusel_identity, pci_bus_id) + sizeof(gpusel_identity::pci_bus_id);
constexpr std::size_t kInfoFirst =
    offsetof(gpusel_gpu_info, mig_enabled) + sizeof(gpusel_gpu_info::mig_enabled);
constexpr std::size_t kIdentityFieldsEnd = kIdentityFirst;
constexpr std::size_t kInfoFieldsEnd = kInfoFirst;

template <typename T>
void check(bool identity, int which, std::size_t claimed, std::size_t extra, std::size_t first,
           std::size_t fields_end, const std::optional<T>* references) {
  // The caller's block: never more than its claim, never less than `size` itself.
  const std::size_t block = std::max(sizeof(std::size_t), std::min(claimed, sizeof(T) + extra));
  auto* out = static_cast<unsigned char*>(std::malloc(block));
  if (out == nullptr) return;
  std::memset(out, kUntouched, block);
  std::memcpy(out, &claimed, sizeof claimed);
  const gpusel_status status = call(identity, which, out);
  std::size_t claimed_after = 0;
  std::memcpy(&claimed_after, out, sizeof claimed_after);
  if (claimed_after != claimed) finding("the caller's size was overwritten");
  std::size_t written = sizeof(std::size_t);
  if (status == GPUSEL_OK) {
    if (claimed < first) finding("a size below the first version's was accepted");
    if (which < 0 || which >= kGpus || !references[which]) finding("an unknown GPU was served");
    written = std::min(claimed, fields_end);
    if (std::memcmp(
            out + sizeof(std::size_t),
            reinterpret_cast<const unsigned char*>(&*references[which]) + sizeof(std::size_t),
            written - sizeof(std::size_t)) != 0)
      finding("the filled fields differ from a right-sized caller's");
  } else if (status != GPUSEL_BAD_INPUT) {
    finding("a status other than OK or BAD_INPUT");
  } else if (claimed >= first && which >= 0 && which < kGpus) {
    finding("a valid call of a large enough size was refused");
  }
  for (std::size_t i = written; i < block; ++i) {
    if (out[i] != kUntouched) finding("a byte the library must not write was changed");
  }
  std::free(out);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe");
  const std::filesystem::path sim = exe.parent_path().parent_path() / "lib" / "gpusel" / "sim";
  if (!std::filesystem::exists(sim / "libcuda.so.1")) {
    std::fprintf(stderr, "fuzz_c_structs: no simulator in %s (build the fuzz preset)\n",
                 sim.c_str());
    std::exit(1);
  }
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "GPUSEL_GPUS", "GPUSEL_GPU",
                           "LOCAL_RANK", "SLURM_LOCALID"})
    ::unsetenv(name);
  ::setenv("GPUSEL_SIM_MACHINE", GPUSEL_SOURCE_DIR "/sim/machines/dgx-h100.toml", 1);
  ::setenv("GPUSEL_CUDA_LIBRARY", (sim / "libcuda.so.1").c_str(), 1);
  ::setenv("GPUSEL_NVML_LIBRARY", (sim / "libnvidia-ml.so.1").c_str(), 1);
  if (gpusel_list_gpus(&the_list) != GPUSEL_OK || gpusel_gpu_list_count(the_list) != kGpus)
    finding("the simulated dgx-h100 cannot be listed");
  for (int i = 0; i < kGpus; ++i) {
    gpusel_identity id{};
    id.size = sizeof id;
    if (gpusel_gpu_identity(i, &id) != GPUSEL_OK) finding("a right-sized identity call failed");
    identities[i] = id;
    gpusel_gpu_info info{};
    info.size = sizeof info;
    if (gpusel_gpu_list_get(the_list, static_cast<std::size_t>(i), &info) != GPUSEL_OK)
      finding("a right-sized list entry call failed");
    infos[i] = info;
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::uint64_t claimed = 0;
  for (std::size_t i = 1; i < 9 && i < size; ++i)
    claimed |= std::uint64_t{data[i]} << (8 * (i - 1));
  // Mostly valid GPUs, some past the end and negative ordinals.
  const int which = size > 9 ? static_cast<int>(static_cast<std::int8_t>(data[9])) % 12 : 0;
  const std::size_t extra = size > 10 ? data[10] % 65 : 0;
  if (data[0] % 2 == 0) {
    check<gpusel_identity>(true, which, static_cast<std::size_t>(claimed), extra, kIdentityFirst,
                           kIdentityFieldsEnd, identities);
  } else {
    check<gpusel_gpu_info>(false, which, static_cast<std::size_t>(claimed), extra, kInfoFirst,
                           kInfoFieldsEnd, infos);
  }
  return 0;
}
