// CUDA driver loader: dlopen once, look up cuda.def's required symbols (the optional ones on
// first use), never dlclose.
#include "gpusel/cuda.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include "cuda_abi.hpp"
#include "cuda_api.hpp"
#include "dl.hpp"
#include "env.hpp"
#include "gpusel/error.hpp"
#include "gpusel_detail.hpp"
#include "text.hpp"

namespace gpusel::detail {
namespace {

// More devices than any machine holds (the same bound as NVML's GPU count): a count past this is
// a broken driver, not a machine.
constexpr int kMaxDevices = 4096;
// The longest error name or description taken from the driver.
constexpr std::size_t kMaxErrorText = 512;

// A string the driver wrote into `buf`, read within the buffer's own bound (a driver may leave it
// unterminated).
template <std::size_t N>
std::string read_string(const char (&buf)[N]) {
  return std::string(buf, strnlen(buf, N));
}

CudaLibrary open_library() {
  CudaLibrary lib;
  std::string path;
  void* handle =
      open_driver_library("GPUSEL_CUDA_LIBRARY", detail::kCudaLibraryName, path, lib.reason);
  if (handle == nullptr) {
    lib.code = ErrorCode::LibraryNotLoaded;
    return lib;
  }
  lib.path = path;
  std::string missing;
#define GPUSEL_CUDA(name, symbol, required, params) \
  bind_driver_function(lib.api.name, handle, #symbol, required, missing);
#include "cuda.def"
#undef GPUSEL_CUDA
  if (!missing.empty()) {
    lib.reason = path + " lacks " + missing +
                 " (a driver too old for gpusel, or not the CUDA driver library)";
    lib.code = ErrorCode::LibraryIncomplete;
    return lib;
  }
  lib.usable = true;
  // Once, here: what the driver's behaviour depends on (cuDeviceGetUuid's answer for a MIG
  // device) and what bind and doctor report. It needs no cuInit.
  int version = 0;
  if (lib.api.cuDriverGetVersion(&version) == CUDA_SUCCESS && version > 0) {
    lib.driver_version = version;
  }
  return lib;
}

}  // namespace

const CudaLibrary& cuda_library() {
  static const CudaLibrary lib = open_library();
  return lib;
}

void cuda_functions_missing(const std::string& feature, const std::string& missing) {
  throw failure(feature + " needs " + missing + ", which " + cuda_library().path +
                    " lacks (a CUDA driver too old for it, or not the CUDA driver library)",
                Problem{ErrorCode::LibraryIncomplete, missing, 0});
}

std::string cuda_error_text(const CudaApi& api, CUresult rc) {
  std::string text = "CUDA error " + std::to_string(rc);
  const char* name = nullptr;
  const char* desc = nullptr;
  if (api.cuGetErrorName != nullptr && api.cuGetErrorName(rc, &name) == CUDA_SUCCESS && name) {
    text = std::string(name, strnlen(name, kMaxErrorText));
  }
  if (api.cuGetErrorString != nullptr && api.cuGetErrorString(rc, &desc) == CUDA_SUCCESS && desc) {
    text += " (" + std::string(desc, strnlen(desc, kMaxErrorText)) + ")";
  }
  return text;
}

const CudaApi& cuda_initialised() {
  const CudaLibrary& lib = cuda_library();
  if (!lib.usable) throw failure("CUDA is unavailable: " + lib.reason, Problem{lib.code, "", 0});
  static std::once_flag once;
  static CUresult init_rc = CUDA_SUCCESS;
  std::call_once(once, [&] { init_rc = lib.api.cuInit(0); });
  if (init_rc == CUDA_ERROR_STUB_LIBRARY) {
    throw failure(
        "CUDA is unavailable: the libcuda.so.1 found is the CUDA toolkit's link stub, not the "
        "driver; remove the toolkit's stubs folder from LD_LIBRARY_PATH",
        Problem{ErrorCode::CudaLinkStub, "cuInit", init_rc});
  }
  if (init_rc == CUDA_ERROR_NO_DEVICE) {
    const auto cvd = gpusel::detail::env_value("CUDA_VISIBLE_DEVICES");
    throw failure(std::string("CUDA sees no device (CUDA_ERROR_NO_DEVICE) with ") +
                      (cvd ? "CUDA_VISIBLE_DEVICES=" + detail::quote_value(*cvd)
                           : std::string("CUDA_VISIBLE_DEVICES unset")) +
                      detail::reader_text("; run `gpusel list` to see which GPUs it exposes",
                                          "; gpusel_list_gpus (or `gpusel list`) shows which GPUs "
                                          "it exposes"),
                  Problem{ErrorCode::NoDevice, "cuInit", init_rc});
  }
  if (init_rc != CUDA_SUCCESS) {
    throw failure("cuInit failed: " + cuda_error_text(lib.api, init_rc),
                  Problem{ErrorCode::DriverCallFailed, "cuInit", init_rc});
  }
  return lib.api;
}

namespace {

void check(const CudaApi& api, CUresult rc, const char* what) {
  if (rc != CUDA_SUCCESS) {
    throw failure(std::string(what) + " failed: " + cuda_error_text(api, rc),
                  Problem{ErrorCode::DriverCallFailed, what, rc});
  }
}

}  // namespace

std::vector<CudaHandle> cuda_device_handles() {
  const CudaApi& api = cuda_initialised();
  int count = 0;
  check(api, api.cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (count < 0 || count > kMaxDevices) {
    throw failure("cuDeviceGetCount reported " + std::to_string(count) + " devices" +
                      (count < 0 ? std::string()
                                 : ", more than any machine holds (at most " +
                                       std::to_string(kMaxDevices) + ")") +
                      "; the CUDA driver library is broken",
                  Problem{ErrorCode::DriverBroken, "cuDeviceGetCount", count});
  }
  // cuDeviceGetUuid (v1) gave a MIG device's parent GPU before CUDA 13, which tells MIG devices
  // apart; from CUDA 13 it gives the MIG device's own UUID, as v2 does, and tells nothing.
  const int version = cuda_library().driver_version;
  const bool v1_gives_parent = api.cuDeviceGetUuidV1 != nullptr && version < 13000;
  std::vector<CudaHandle> out;
  out.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    CudaHandle h;
    h.ordinal = i;
    check(api, api.cuDeviceGet(&h.device, i), "cuDeviceGet");
    CUuuid uuid{};
    check(api, api.cuDeviceGetUuid(&uuid, h.device), "cuDeviceGetUuid_v2");
    const auto* raw = reinterpret_cast<const unsigned char*>(uuid.bytes);
    h.uuid = detail::format_uuid(raw);
    CUuuid parent{};
    if (v1_gives_parent && api.cuDeviceGetUuidV1(&parent, h.device) == CUDA_SUCCESS &&
        std::memcmp(parent.bytes, uuid.bytes, sizeof uuid.bytes) != 0) {
      h.uuid = detail::format_uuid(raw, "MIG-");
      h.parent_uuid = detail::format_uuid(reinterpret_cast<const unsigned char*>(parent.bytes));
    }
    out.push_back(std::move(h));
  }
  return out;
}

CudaDevice cuda_device(const CudaHandle& h) {
  const CudaApi& api = cuda_initialised();
  const CUdevice dev = h.device;
  CudaDevice d;
  d.cuda_ordinal = h.ordinal;
  d.uuid = h.uuid;
  d.parent_uuid = h.parent_uuid.empty() ? h.uuid : h.parent_uuid;
  char name[256] = {};
  check(api, api.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
  d.name = read_string(name);
  std::size_t total = 0;
  check(api, api.cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem_v2");
  d.memory_total_bytes = total;
  check(api,
        api.cuDeviceGetAttribute(&d.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
        "cuDeviceGetAttribute");
  check(api,
        api.cuDeviceGetAttribute(&d.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
        "cuDeviceGetAttribute");
  check(api, api.cuDeviceGetAttribute(&d.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
        "cuDeviceGetAttribute");
  int l2 = 0;
  if (api.cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev) == CUDA_SUCCESS &&
      l2 > 0) {
    d.l2_cache_bytes = static_cast<std::uint64_t>(l2);
  }
  if (api.cuDeviceGetPCIBusId != nullptr) {
    char bus[32] = {};
    if (api.cuDeviceGetPCIBusId(bus, sizeof bus, dev) == CUDA_SUCCESS) {
      d.pci_bus_id = detail::normalise_bus_id(read_string(bus));
    }
  }
  return d;
}

}  // namespace gpusel::detail

GPUSEL_BEGIN_NAMESPACE

int cuda_driver_version() {
  return detail::cuda_library().driver_version;
}

std::vector<CudaDevice> cuda_devices() {
  std::vector<CudaDevice> out;
  for (const detail::CudaHandle& h : detail::cuda_device_handles()) {
    out.push_back(detail::cuda_device(h));
  }
  return out;
}

GPUSEL_END_NAMESPACE

namespace gpusel::detail {

std::string format_uuid(const unsigned char b[16], const char* prefix) {
  // By hand: a worker's bind formats every visible device's UUID, and snprintf's sixteen %02x
  // cost 3,500 instructions a UUID.
  // Written into a buffer first (a push_back per character cost 800 instructions a UUID).
  static constexpr char kHex[] = "0123456789abcdef";
  char text[36];
  std::size_t n = 0;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text[n++] = '-';
    text[n++] = kHex[b[i] >> 4];
    text[n++] = kHex[b[i] & 0xf];
  }
  // One string made at its full length (a prefix copied, then the rest appended, reallocated).
  const std::size_t p = std::strlen(prefix);
  std::string out(p + n, '\0');
  std::memcpy(out.data(), prefix, p);
  std::memcpy(out.data() + p, text, n);
  return out;
}

namespace {

// The hex digits of `text` from `at` up to `stop` as a number (1 to 8 of them); nullopt
// otherwise. `at` is left past them.
std::optional<unsigned> hex_field(const std::string& text, std::size_t& at, char stop) {
  unsigned value = 0;
  const std::size_t start = at;
  for (; at < text.size() && text[at] != stop; ++at) {
    const int digit = hex_digit(text[at]);
    if (digit < 0 || at - start >= 8) return std::nullopt;
    value = value * 16 + static_cast<unsigned>(digit);
  }
  if (at == start) return std::nullopt;
  return value;
}

void append_hex(std::string& out, unsigned value, int width) {
  char digits[8];
  int n = 0;
  do {
    digits[n++] = "0123456789ABCDEF"[value & 0xf];
    value >>= 4;
  } while (value != 0);
  for (int pad = n; pad < width; ++pad) out.push_back('0');
  while (n > 0) out.push_back(digits[--n]);
}

}  // namespace

std::string normalise_bus_id(const std::string& bus) {
  // The driver's own form (hex fields, no blanks or signs) read by hand: sscanf and snprintf cost
  // each bind's report 4,000 instructions. Anything else as sscanf reads it.
  // Four fields: domain, bus and device before ':', ':' and '.', the function to the end.
  static constexpr char kEnds[] = {':', ':', '.', '\0'};
  unsigned field[4] = {};
  std::size_t at = 0;
  bool plain = true;
  for (int k = 0; k < 4 && plain; ++k) {
    const std::optional<unsigned> v = hex_field(bus, at, kEnds[k]);
    plain = v.has_value() && (k == 3 ? at == bus.size() : at < bus.size());
    if (plain) field[k] = *v;
    ++at;  // past the field's end
  }
  if (plain) {
    std::string out;
    out.reserve(16);
    append_hex(out, field[0], 8);
    out.push_back(':');
    append_hex(out, field[1], 2);
    out.push_back(':');
    append_hex(out, field[2], 2);
    out.push_back('.');
    append_hex(out, field[3], 1);
    return out;
  }
  unsigned domain = 0, b = 0, d = 0, f = 0;
  if (std::sscanf(bus.c_str(), "%x:%x:%x.%x", &domain, &b, &d, &f) != 4) return bus;
  char out[32];
  std::snprintf(out, sizeof out, "%08X:%02X:%02X.%X", domain, b, d, f);
  return out;
}

}  // namespace gpusel::detail
