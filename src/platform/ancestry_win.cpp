// Process ancestry on Windows: not read. Another process's starting environment is not
// available through a supported API, so a worker whose launchers' rank variables disagree is
// refused with the message that names them (the distances stay lower bounds).
#include "ancestry.hpp"
#include "env.hpp"

#include "win.hpp"

namespace gpusel::detail {

std::optional<std::string> env_value(const char* name) {
  const auto v = win::environment(win::widen(name).c_str());
  return v ? std::optional<std::string>(win::narrow(*v)) : std::nullopt;
}

// One look-up a name (the C runtime's environ is not the Win32 environment: env.hpp).
void read_env_values(const char* const* names, std::size_t count, const std::uint64_t*,
                     std::uint64_t, std::optional<std::string>* values) {
  for (std::size_t i = 0; i < count; ++i) values[i] = env_value(names[i]);
}

std::optional<std::map<std::string, std::string>> initial_environment(int) {
  return std::nullopt;
}

std::optional<std::string> process_file(int, const char*, std::size_t) {
  return std::nullopt;
}

std::vector<std::string> process_args(int, std::size_t) {
  return {};
}

std::optional<ProcessStat> process_stat(int) {
  return std::nullopt;
}

int parent_of(int) {
  return 0;
}

int current_pid() {
  return static_cast<int>(GetCurrentProcessId());
}

}  // namespace gpusel::detail
