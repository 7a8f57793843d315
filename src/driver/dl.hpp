// Internal: opening an NVIDIA driver library, shared by the NVML and CUDA loaders.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <type_traits>

namespace gpusel::detail {

// The driver libraries' file names: NVML and CUDA's driver API.
#ifdef _WIN32
inline constexpr const char* kNvmlLibraryName = "nvml.dll";
inline constexpr const char* kCudaLibraryName = "nvcuda.dll";
#else
inline constexpr const char* kNvmlLibraryName = "libnvidia-ml.so.1";
inline constexpr const char* kCudaLibraryName = "libcuda.so.1";
#endif

// Opens the file named by the environment variable `override_var` (read with secure_getenv) or
// else `default_name` (dlopen; on Windows LoadLibraryExW over a fixed list of places, dl_win.cpp),
// never to be closed. On failure returns nullptr and sets `reason`. `path` is set to what was
// opened, for messages.
void* open_driver_library(const char* override_var, const char* default_name, std::string& path,
                          std::string& reason);

// The address of `symbol` in a library open_driver_library opened; nullptr when it lacks it.
void* find_symbol(void* handle, const char* symbol);

// Appends `symbol` to a comma-separated list of missing symbols.
void note_missing(std::string& missing, const char* symbol);

// An optional driver function, looked up on its first use: a command calls a few of the optional
// functions of nvml.def and cuda.def (most of CUDA's are the bandwidth benchmark's), and each
// look-up costs about 800 instructions of every start. Callable from any thread: two first calls
// may both look it up, and find the same address. Used as the plain pointer it stands for:
// called, tested, or compared with nullptr (each of which looks it up).
template <typename Fn>
class LazyFunction {
 public:
  LazyFunction() = default;
  // Copied only while a loader builds its table, before any thread shares it.
  LazyFunction(const LazyFunction& other)
      : handle_(other.handle_),
        name_(other.name_),
        fn_(other.fn_.load(std::memory_order_relaxed)),
        looked_(other.looked_.load(std::memory_order_relaxed)) {}
  LazyFunction& operator=(const LazyFunction&) = delete;
  void bind(void* handle, const char* name) {
    handle_ = handle;
    name_ = name;
  }
  Fn get() const {
    if (looked_.load(std::memory_order_acquire)) return fn_.load(std::memory_order_relaxed);
    Fn fn = handle_ == nullptr ? nullptr : reinterpret_cast<Fn>(find_symbol(handle_, name_));
    fn_.store(fn, std::memory_order_relaxed);
    looked_.store(true, std::memory_order_release);
    return fn;
  }
  explicit operator bool() const { return get() != nullptr; }
  bool operator==(std::nullptr_t) const { return get() == nullptr; }
  template <typename... Args>
  auto operator()(Args... args) const {
    return get()(args...);
  }

 private:
  void* handle_ = nullptr;  // set when the library is opened, before the table is shared
  const char* name_ = "";
  mutable std::atomic<Fn> fn_{nullptr};
  mutable std::atomic<bool> looked_{false};
};

// A function of a loader's table: a plain pointer for a required function (looked up when the
// library is opened: a missing one makes the library unusable), a LazyFunction for an optional
// one.
template <bool Required, typename Fn>
using DriverFunction = std::conditional_t<Required, Fn, LazyFunction<Fn>>;

// Fills one entry of a loader's table from the opened library: a required function at once
// (noted in `missing` when the library lacks it), an optional one to be looked up when called.
template <typename F>
void bind_driver_function(F& fn, void* handle, const char* symbol, bool required,
                          std::string& missing) {
  if constexpr (std::is_pointer_v<F>) {
    fn = reinterpret_cast<F>(find_symbol(handle, symbol));
    if (required && fn == nullptr) note_missing(missing, symbol);
  } else {
    fn.bind(handle, symbol);
  }
}

}  // namespace gpusel::detail
