// gpusel sim shell: a shell (or a command) on a simulated machine that also shows the machine's
// device files and the NVIDIA driver's procfs entries, in a private mount namespace, for tools
// that look there rather than ask NVML (Slurm's MIG autodetection reads
// /proc/driver/nvidia-caps/mig-minors; launch scripts list /dev/nvidia*). docs/simulator.md.
#include <fmt/format.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "file_text.hpp"
#include "gpusel/amd.hpp"
#include "gpusel/error.hpp"
#include "gpusel/nvml.hpp"

#ifdef __linux__
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#endif

namespace gpusel::cli {

#ifdef __linux__
namespace {

// The character-device majors the NVIDIA driver uses: 195 for /dev/nvidiaN and nvidiactl (a
// fixed number); the others are given out at load time, so these are typical values.
constexpr unsigned kNvidiaMajor = 195, kUvmMajor = 510, kCapsMajor = 511;
// AMD's: DRM's 226 for /dev/dri/cardN and renderD(128+N); KFD's is given out at load time (one
// machine's figure here).
constexpr unsigned kDrmMajor = 226, kKfdMajor = 235;
// The driver's MIG capability minors (/proc/driver/nvidia-caps/mig-minors): config 1, monitor 2,
// then for each GPU minor (0-31) and GPU instance (0-14) its access file and those of compute
// instances 0-7, in that order.
constexpr unsigned kMigGpus = 32, kMigGpuInstances = 15, kMigComputeInstances = 8;

unsigned gi_minor(unsigned gpu, unsigned gi) {
  return 3 + (gpu * kMigGpuInstances + gi) * (1 + kMigComputeInstances);
}
unsigned ci_minor(unsigned gpu, unsigned gi, unsigned ci) {
  return gi_minor(gpu, gi) + 1 + ci;
}

std::string mig_minors_text() {
  std::string out = "config 1\nmonitor 2\n";
  for (unsigned g = 0; g < kMigGpus; ++g) {
    for (unsigned gi = 0; gi < kMigGpuInstances; ++gi) {
      out += fmt::format("gpu{}/gi{}/access {}\n", g, gi, gi_minor(g, gi));
      for (unsigned ci = 0; ci < kMigComputeInstances; ++ci)
        out += fmt::format("gpu{}/gi{}/ci{}/access {}\n", g, gi, ci, ci_minor(g, gi, ci));
    }
  }
  return out;
}

[[noreturn]] void cannot(const std::string& what, int error) {
  throw gpusel::failure("sim shell: cannot " + what + ": " + std::strerror(error) +
                        "; the simulated device files need a private mount namespace: run as "
                        "root, or where unprivileged user namespaces are allowed "
                        "(sysctl kernel.unprivileged_userns_clone=1); `gpusel sim exec` runs "
                        "programs on the machine without them");
}

void write_file(const std::string& path, const std::string& text) {
  if (!detail::write_file_text(path, text)) cannot("write " + path, errno);
}

void make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) cannot("make " + path, errno);
}

// Enters a mount namespace of its own (as root), or a user namespace that maps this user to
// itself and a mount namespace in it; mounts made later are seen by this process and its
// children only.
void enter_private_namespace() {
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  if (uid == 0) {
    if (::unshare(CLONE_NEWNS) != 0) cannot("enter a mount namespace of its own", errno);
  } else {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
      cannot("enter a user and mount namespace of its own", errno);
    write_file("/proc/self/setgroups", "deny");
    write_file("/proc/self/uid_map", fmt::format("{} {} 1\n", uid, uid));
    write_file("/proc/self/gid_map", fmt::format("{} {} 1\n", gid, gid));
  }
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    cannot("make the mounts private", errno);
}

// Covers `dir` with a tmpfs that holds what `dir` held (each entry bound back from the covered
// folder, symbolic links copied), so that files can be added to it without touching the
// machine's own.
void cover(const std::string& dir) {
  const int old = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (old < 0) cannot("open " + dir, errno);
  std::vector<std::pair<std::string, unsigned char>> entries;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") entries.emplace_back(name, e->d_type);
    }
    ::closedir(d);
  }
  if (::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID, "mode=0755") != 0)
    cannot("mount a tmpfs on " + dir, errno);
  const std::string from = fmt::format("/proc/self/fd/{}/", old);
  for (const auto& [name, type] : entries) {
    const std::string source = from + name, target = dir + "/" + name;
    if (type == DT_LNK) {
      char link[4096];
      const ssize_t n = ::readlink(source.c_str(), link, sizeof link - 1);
      if (n > 0 &&
          ::symlink(std::string(link, static_cast<std::size_t>(n)).c_str(), target.c_str()) != 0)
        cannot("copy the link " + target, errno);
      continue;
    }
    if (type == DT_DIR) {
      make_dir(target);
    } else {
      const int fd = ::open(target.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
      if (fd < 0) cannot("make " + target, errno);
      ::close(fd);
    }
    // An entry the kernel will not bind (a socket's inode, say) is left as a placeholder.
    (void)::mount(source.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr);
  }
  ::close(old);
}

// A device file: a character device of the driver's numbers as root; where device files cannot
// be made (a user namespace), a link to /dev/null, which tools that only stat it (Slurm) accept.
void device_file(const std::string& path, unsigned major, unsigned minor) {
  if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(major, minor)) == 0) {
    (void)::chmod(path.c_str(), 0666);  // as the driver makes them, whatever the umask
    return;
  }
  if (::symlink("/dev/null", path.c_str()) != 0) cannot("make " + path, errno);
}

// /proc/driver/nvidia/gpus/<bus id>/information, as the driver writes it.
std::string information_text(const GpuInfo& gpu, const std::string& bus) {
  return fmt::format(
      "Model: \t\t {}\nIRQ:   \t\t {}\nGPU UUID: \t {}\nVideo BIOS: \t ??.??.??.??.??\n"
      "Bus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\n"
      "Bus Location: \t {}\nDevice Minor: \t {}\nGPU Excluded:\t No\n",
      gpu.name, 100 + gpu.index, gpu.uuid, bus, gpu.index);
}

// "00000000:07:00.0" (NVML) -> "0000:07:00.0" (the driver's procfs and sysfs), lower case.
std::string short_bus_id(const std::string& nvml) {
  std::string s = nvml.size() > 12 ? nvml.substr(nvml.size() - 12) : nvml;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void write_capability(const std::string& path, unsigned minor) {
  write_file(path,
             fmt::format("DeviceFileMinor: {}\nDeviceFileMode: 292\nDeviceFileModify: 1\n", minor));
}

// The machine's device files under /dev and the driver's entries under /proc/driver.
void show_machine(const NvmlSnapshot& snap) {
  cover("/dev");
  for (const GpuInfo& gpu : snap.gpus)
    device_file(fmt::format("/dev/nvidia{}", gpu.index), kNvidiaMajor, gpu.index);
  device_file("/dev/nvidiactl", kNvidiaMajor, 255);
  device_file("/dev/nvidia-uvm", kUvmMajor, 0);
  device_file("/dev/nvidia-uvm-tools", kUvmMajor, 1);
  make_dir("/dev/nvidia-caps");
  device_file("/dev/nvidia-caps/nvidia-cap1", kCapsMajor, 1);
  device_file("/dev/nvidia-caps/nvidia-cap2", kCapsMajor, 2);

  cover("/proc/driver");
  make_dir("/proc/driver/nvidia");
  write_file("/proc/driver/nvidia/version",
             fmt::format("NVRM version: NVIDIA UNIX x86_64 Kernel Module  {}  (gpusel simulated "
                         "machine)\nGCC version:  none\n",
                         snap.driver_version));
  make_dir("/proc/driver/nvidia/gpus");
  make_dir("/proc/driver/nvidia/capabilities");
  make_dir("/proc/driver/nvidia/capabilities/mig");
  write_capability("/proc/driver/nvidia/capabilities/mig/config", 1);
  write_capability("/proc/driver/nvidia/capabilities/mig/monitor", 2);
  make_dir("/proc/driver/nvidia-caps");
  write_file("/proc/driver/nvidia-caps/mig-minors", mig_minors_text());
  for (const GpuInfo& gpu : snap.gpus) {
    if (gpu.failed()) continue;  // a lost GPU has no entry the driver can fill
    const std::string bus = short_bus_id(gpu.pci_bus_id);
    make_dir("/proc/driver/nvidia/gpus/" + bus);
    write_file("/proc/driver/nvidia/gpus/" + bus + "/information", information_text(gpu, bus));
    const std::string caps = fmt::format("/proc/driver/nvidia/capabilities/gpu{}", gpu.index);
    if (gpu.migs.empty() || gpu.index >= kMigGpus) continue;
    make_dir(caps);
    make_dir(caps + "/mig");
    for (const MigDevice& m : gpu.migs) {
      if (m.gpu_instance >= kMigGpuInstances || m.compute_instance >= kMigComputeInstances)
        continue;
      const std::string gi = fmt::format("{}/mig/gi{}", caps, m.gpu_instance);
      const std::string ci = fmt::format("{}/ci{}", gi, m.compute_instance);
      make_dir(gi);
      make_dir(ci);
      const unsigned g = gi_minor(gpu.index, m.gpu_instance);
      const unsigned c = ci_minor(gpu.index, m.gpu_instance, m.compute_instance);
      write_capability(gi + "/access", g);
      write_capability(ci + "/access", c);
      device_file(fmt::format("/dev/nvidia-caps/nvidia-cap{}", g), kCapsMajor, g);
      device_file(fmt::format("/dev/nvidia-caps/nvidia-cap{}", c), kCapsMajor, c);
    }
  }
}

// An AMD machine's device files: /dev/kfd (HIP's compute device, what tells an AMD machine) and
// each GPU's DRM card and render node, numbered as rocm-smi numbers them. `alone`: no NVIDIA
// GPU's files were made (a machine with both makers' GPUs has both sets).
void show_amd_machine(const AmdSnapshot& amd, bool alone) {
  if (alone) cover("/dev");
  device_file("/dev/kfd", kKfdMajor, 0);
  make_dir("/dev/dri");
  for (const AmdGpu& g : amd.gpus) {
    device_file(fmt::format("/dev/dri/card{}", g.index), kDrmMajor, g.index);
    device_file(fmt::format("/dev/dri/renderD{}", 128 + g.index), kDrmMajor, 128 + g.index);
  }
}

}  // namespace

int run_sim_shell(const std::string& machine, const std::vector<std::string>& command) {
  const SimSetup setup = sim_setup(machine);
  std::vector<std::string> argv = command;
  if (argv.empty()) {
    const char* shell = std::getenv("SHELL");
    argv.push_back(shell != nullptr && *shell != '\0' ? shell : "/bin/sh");
  }
  apply_sim(setup);  // first: its PATH finds the simulator's nvidia-smi
  const std::string program = program_path("sim shell", argv.front());
  const NvmlSnapshot snap = query_nvml(NvmlQuery{});
  const AmdSnapshot amd = query_rocm_smi();
  const bool amd_gpus = amd.available && !amd.gpus.empty();
  if (!snap.available && !amd_gpus) {
    throw gpusel::failure("sim shell " + machine + ": the simulated NVML does not answer (" +
                              snap.reason + "), so there are no GPUs to make device files for; " +
                              "`gpusel sim exec` runs programs on a machine with an NVML fault",
                          snap.problem);
  }
  enter_private_namespace();
  if (snap.available) show_machine(snap);
  if (amd_gpus) show_amd_machine(amd, !snap.available);
  ::setenv("GPUSEL_SIM_SHELL", machine.c_str(), 1);
  exec_program("sim shell", program, argv);
}
#else
int run_sim_shell(const std::string& machine, const std::vector<std::string>&) {
  throw gpusel::failure("sim shell " + machine +
                        ": needs Linux mount namespaces; on this system use `gpusel sim exec " +
                        machine +
                        " -- COMMAND`, which runs programs on the machine without its "
                        "device files");
}
#endif

}  // namespace gpusel::cli
