// Usage shared between the simulated drivers of several processes.
#include "usage.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "text.hpp"

namespace gpusel::sim {
namespace {

void make_dir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return;
}

std::mutex entries_mutex;
std::map<std::string, int> entries;  // this process's entry per GPU folder: a locked descriptor

}  // namespace

std::string usage_dir(const SimMachine& machine) {
  if (const char* dir = std::getenv("GPUSEL_SIM_STATE_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a of the machine file's path
  for (unsigned char c : machine.path) hash = (hash ^ c) * 1099511628211ull;
  char name[96];
  std::snprintf(name, sizeof name, "/tmp/gpusel-sim-%u/%016llx", static_cast<unsigned>(getuid()),
                static_cast<unsigned long long>(hash));
  return name;
}

void note_usage(const SimMachine& machine, const std::string& uuid, std::uint64_t bytes) {
  if (!detail::is_plain_file_name(uuid)) return;
  const std::string dir = usage_dir(machine);
  const std::string gpu_dir = dir + "/" + uuid;
  std::lock_guard<std::mutex> lock(entries_mutex);
  auto it = entries.find(gpu_dir);
  if (it == entries.end()) {
    const std::string parent = dir.substr(0, dir.rfind('/'));
    if (!parent.empty()) make_dir(parent, 0700);
    make_dir(dir, 0700);
    make_dir(gpu_dir, 0700);
    const std::string path = gpu_dir + "/" + std::to_string(getpid());
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      close(fd);
      return;
    }
    it = entries.emplace(gpu_dir, fd).first;
  }
  char text[32];
  const int n = std::snprintf(text, sizeof text, "%llu\n", static_cast<unsigned long long>(bytes));
  if (ftruncate(it->second, 0) == 0 && n > 0) {
    (void)!pwrite(it->second, text, static_cast<std::size_t>(n), 0);
  }
}

std::vector<SimProcess> live_processes(const SimMachine& machine, const std::string& uuid) {
  std::vector<SimProcess> out;
  if (!detail::is_plain_file_name(uuid)) return out;
  const std::string gpu_dir = usage_dir(machine) + "/" + uuid;
  DIR* d = opendir(gpu_dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string path = gpu_dir + "/" + name;
    const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {  // nobody holds it: its process is gone
      unlink(path.c_str());
      close(fd);
      continue;
    }
    char text[32] = {};
    const ssize_t got = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    SimProcess p;
    p.pid = static_cast<unsigned>(std::strtoul(name.c_str(), nullptr, 10));
    p.used_memory = kContextBytes + (got > 0 ? std::strtoull(text, nullptr, 10) : 0);
    out.push_back(p);
  }
  closedir(d);
  return out;
}

}  // namespace gpusel::sim
