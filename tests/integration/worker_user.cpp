// A worker written against gpusel's C++ API, driven by its arguments so that tests can walk it
// through publish/bind sequences. One line of output per step:
//   <step>: ok <result>        or        <step>: error <exit code> <message>
// Steps: publish:X  assign:X  env  visible  bind  bind:DEFAULT  current  threads:N  sleep:MS
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpusel/error.hpp"
#include "gpusel/worker.hpp"

extern "C" {
typedef struct CUctx_st* CUcontext;
int cuCtxGetCurrent(CUcontext* ctx);
int cuDeviceGet(int* device, int ordinal);
int cuDevicePrimaryCtxRetain(CUcontext* ctx, int device);
int cuDevicePrimaryCtxRelease_v2(int device);
}

namespace {

// True when the calling thread's current context is the primary context of `ordinal`.
bool primary_is_current(int ordinal) {
  CUcontext current = nullptr, primary = nullptr;
  int device = 0;  // a CUdevice: cuDeviceGet's, not the ordinal
  if (cuCtxGetCurrent(&current) != 0 || cuDeviceGet(&device, ordinal) != 0 ||
      cuDevicePrimaryCtxRetain(&primary, device) != 0)
    return false;
  cuDevicePrimaryCtxRelease_v2(device);
  return current != nullptr && current == primary;
}

std::string step(const std::string& s) {
  const auto colon = s.find(':');
  const std::string op = s.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : s.substr(colon + 1);
  if (op == "publish") {
    gpusel::set_assigned_gpu(arg);
    return "";
  }
  if (op == "assign") {
    gpusel::assign_gpu(arg);
    return "";
  }
  if (op == "env") {
    auto info = gpusel::assign_from_environment();
    if (!info) return "none";
    return info->rank ? info->rank->variable + "=" + std::to_string(info->rank->rank)
                      : gpusel::source_name(info->source);
  }
  if (op == "visible") {
    auto v = gpusel::assigned_visible_gpu();
    CUcontext current = nullptr;
    cuCtxGetCurrent(&current);
    return (v ? std::to_string(*v) : "none") + (current ? " context" : " no-context");
  }
  if (op == "bind") {
    const int ordinal =
        arg.empty() ? gpusel::bind_assigned_gpu() : gpusel::bind_assigned_gpu(std::stoi(arg));
    return std::to_string(ordinal) + " " + gpusel::gpu_identity(ordinal).uuid +
           (primary_is_current(ordinal) ? " current" : " NOT-current");
  }
  if (op == "sleep") {  // holds whatever it bound for a while (a worker at work)
    std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(arg)));
    return "";
  }
  if (op == "threads") {
    const int n = std::stoi(arg);
    std::vector<int> ordinals(static_cast<std::size_t>(n), -1);
    std::vector<int> current(static_cast<std::size_t>(n), 0);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        try {
          ordinals[static_cast<std::size_t>(i)] = gpusel::bind_assigned_gpu();
          current[static_cast<std::size_t>(i)] =
              primary_is_current(ordinals[static_cast<std::size_t>(i)]);
        } catch (const std::exception&) {
        }
      });
    }
    for (auto& t : threads) t.join();
    std::string out;
    for (int i = 0; i < n; ++i) {
      out += std::to_string(ordinals[static_cast<std::size_t>(i)]) +
             (current[static_cast<std::size_t>(i)] ? "c " : "x ");
    }
    return out;
  }
  throw std::runtime_error("unknown step " + s);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    try {
      std::printf("%s: ok %s\n", argv[i], step(argv[i]).c_str());
    } catch (const gpusel::Error& e) {
      std::printf("%s: error %d %s\n", argv[i], e.exit_code(), e.what());
    }
    std::fflush(stdout);
  }
  return 0;
}
