// The machines libgpusel-sim-machines.so has parsed in this process (machine_share.hpp).
#include <memory>
#include <mutex>
#include <vector>

#include "machine_share.hpp"
#include "trace.hpp"

namespace gpusel::sim {
namespace {

struct Entry {
  MachineFile::Stamp stamp;
  SimMachine machine;
};

struct Cache {
  std::mutex mutex;
  std::vector<std::unique_ptr<const Entry>> entries;  // never removed: their machines are in use
};

Cache& cache() {
  // Never destroyed: a double may use its machine in another library's destructor at exit.
  static Cache* const c = new Cache;
  return *c;
}

// GPUSEL_SIM_TRACE: each machine file the library reads, and each it hands out again under
// another path.
void note(const std::string& what) {
  if (trace::on()) {
    trace::emit("gpusel-sim[" + std::to_string(::getpid()) + "] " + kMachinesLibrary + ": " + what);
  }
}

}  // namespace

const SimMachine& shared_machine(const std::string& path) {
  Cache& c = cache();
  const std::lock_guard<std::mutex> lock(c.mutex);
  MachineFile file(path);
  const MachineFile::Stamp& stamp = file.stamp();
  const Entry* same_file = nullptr;
  for (auto it = c.entries.rbegin(); it != c.entries.rend(); ++it) {
    const Entry& e = **it;
    if (!(e.stamp == stamp)) continue;
    if (e.machine.path == path) return e.machine;
    // Another path to the same file: only where the platform says which file it is.
    if (same_file == nullptr && stamp.inode != 0) same_file = &e;
  }
  auto entry = std::make_unique<Entry>();
  entry->stamp = stamp;
  if (same_file != nullptr) {
    entry->machine = same_file->machine;
    entry->machine.path = path;
    std::string line = "READ ";
    trace::quote(line, path.c_str());
    line += " (the file ";
    trace::quote(line, same_file->machine.path.c_str());
    line += ", read before)";
    note(line);
  } else {
    entry->machine = parse_machine(file.read(), path);
    std::string line = "READ ";
    trace::quote(line, path.c_str());
    line += " (" + std::to_string(entry->machine.gpus.size()) + " GPUs)";
    note(line);
  }
  c.entries.push_back(std::move(entry));
  return c.entries.back()->machine;
}

}  // namespace gpusel::sim
