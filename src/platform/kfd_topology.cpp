// The KFD topology's GPU nodes (kfd_topology.hpp), from the node folders the amdgpu driver makes:
// nodes/<n>/gpu_id (0 for a CPU node) and nodes/<n>/properties, one "name value" pair a line.
#include "kfd_topology.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "env.hpp"
#include "file_text.hpp"

#ifndef _WIN32
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#endif

namespace gpusel::detail {
namespace {

// A decimal number of up to 20 digits, the whole text.
std::optional<std::uint64_t> read_number(const std::string& text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const std::uint64_t next = v * 10 + static_cast<std::uint64_t>(c - '0');
    if (next < v) return std::nullopt;
    v = next;
  }
  return v;
}

std::optional<std::string> first_line(const std::filesystem::path& file) {
  std::optional<std::string> read = read_first_line(file.string());
  if (!read) return std::nullopt;
  std::string line = std::move(*read);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

// Why `file` cannot be read as a file, naming it; nullopt when it can.
std::optional<std::string> unreadable(const std::filesystem::path& file) {
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (ec) return file.string() + " cannot be read: " + ec.message();
  if (!std::filesystem::is_regular_file(status)) return file.string() + " is not a file";
  if (!read_file_text(file.string(), 0)) {  // opened only
    return file.string() + " cannot be read: " + std::strerror(errno);
  }
  return std::nullopt;
}

}  // namespace

std::string kfd_nodes_folder() {
  if (const auto set = env_value("GPUSEL_KFD_TOPOLOGY"); set && !set->empty()) return *set;
  return "/sys/class/kfd/kfd/topology/nodes";
}

std::optional<std::vector<KfdGpuNode>> read_kfd_gpu_nodes(const std::string& folder,
                                                          std::string* why) {
  namespace fs = std::filesystem;
  auto unknown = [why](std::string text) -> std::optional<std::vector<KfdGpuNode>> {
    if (why != nullptr) *why = std::move(text);
    return std::nullopt;
  };
  std::error_code ec;
  std::vector<unsigned> numbers;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const auto n = read_number(it->path().filename().string());
    if (n && *n < 65536) numbers.push_back(static_cast<unsigned>(*n));
  }
  if (ec) return unknown(folder + " cannot be read: " + ec.message());
  if (numbers.empty()) return unknown(folder + " holds no node folder");
  std::sort(numbers.begin(), numbers.end());
  std::vector<KfdGpuNode> out;
  for (unsigned n : numbers) {
    const fs::path node = fs::path(folder) / std::to_string(n);
    // Why a file gave nothing is asked only then (unreadable): the files are read once.
    const fs::path id_file = node / "gpu_id", properties = node / "properties";
    const auto gpu_id = first_line(id_file);
    if (!gpu_id) return unknown(unreadable(id_file).value_or(id_file.string() + " is empty"));
    const auto id = read_number(*gpu_id);
    if (!id) return unknown(id_file.string() + " gives no number");
    if (*id == 0) continue;  // a CPU node
    const std::optional<std::string> text = read_file_text(properties.string());
    if (!text)
      return unknown(unreadable(properties).value_or(properties.string() + " cannot be read"));
    KfdGpuNode g;
    g.node = n;
    bool located = false;
    std::size_t at = 0;
    while (const std::optional<std::string_view> line = next_line(*text, at)) {
      std::size_t word_at = 0;
      const std::string name(next_word(*line, word_at));
      const std::string value(next_word(*line, word_at));
      if (value.empty()) continue;
      const auto v = read_number(value);
      if (!v || *v > 0xffffffffu) {
        if (name == "location_id" || name == "domain")  // an address unread
          return unknown(properties.string() + ": " + name + " " + value +
                         " is not a 32-bit number");
        continue;
      }
      if (name == "location_id") {
        g.location_id = static_cast<std::uint32_t>(*v);
        located = true;
      } else if (name == "domain") {
        g.domain = static_cast<std::uint32_t>(*v);
      } else if (name == "drm_render_minor" && *v > 0) {
        g.render_minor = static_cast<unsigned>(*v);
      }
    }
    if (!located) {
      return unknown(
          unreadable(properties).value_or(properties.string() + " gives no location_id"));
    }
    out.push_back(g);
  }
  return out;
}

std::string render_node_path(unsigned minor) {
  return "/dev/dri/renderD" + std::to_string(minor);
}

int render_node_error(unsigned minor) {
#ifdef _WIN32
  (void)minor;
  return 0;
#else
  // Asked of the kernel's permission check, not by opening it: an open reaches the driver, which
  // wakes a suspended GPU and sets up a GPU address space for the caller.
  if (faccessat(AT_FDCWD, render_node_path(minor).c_str(), R_OK | W_OK, AT_EACCESS) != 0)
    return errno;
  return 0;
#endif
}

}  // namespace gpusel::detail
