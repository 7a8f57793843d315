#include <gtest/gtest.h>
#ifndef _WIN32  // the test that forks is Linux-only
#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <atomic>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "gpusel/worker.hpp"
#include "gpusel_detail.hpp"
#include "machine.hpp"
#include "machine_share.hpp"
#include "text.hpp"

using namespace gpusel::sim;

namespace {

const std::string kMachines = std::string(GPUSEL_SOURCE_DIR) + "/sim/machines";

// A folder of this process's own, made on first use under a name no other process holds (ctest
// runs several of these tests at once, and a run may meet another run's leftovers), readable by
// its owner only, and removed when the process ends.
std::filesystem::path temp_dir() {
  static const struct Own {
    std::filesystem::path path;
    Own() {
      std::random_device random;
      const auto base = std::filesystem::temp_directory_path();
      do {
        path = base / ("gpusel_machine_test." + std::to_string(random()));
      } while (!std::filesystem::create_directory(path));
      std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    }
    ~Own() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } own;
  return own.path;
}

std::string write_temp(const std::string& name, const std::string& text) {
  auto path = temp_dir() / ("gpusel_machine_test_" + name + ".toml");
  std::ofstream(path, std::ios::binary) << text;  // as written, also on Windows (no CRLF)
  return path.string();
}

const char* kGpu = R"(
[[gpu]]
uuid = "GPU-11111111-2222-3333-4444-555555555555"
name = "Test GPU"
pci_bus_id = "00000000:81:00.0"
memory_total = "16GiB"
compute_capability = "8.0"
sm_count = 10
numa_node = 0
cpus = "0-3"
pcie_h2d_gbps = 10
pcie_d2h_gbps = 11
memory_bandwidth_gbps = 100.5
)";

const char* kHead = "name = \"t\"\ndriver_version = \"1\"\ncuda_driver_version = 12000\n";

std::string load_error(const std::string& text) {
  try {
    load_machine(write_temp("bad", text));
  } catch (const MachineError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return "";
}

}  // namespace

TEST(Machine, EveryBundledMachineLoads) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kMachines)) {
    SCOPED_TRACE(entry.path().string());
    SimMachine m = load_machine(entry.path().string());
    EXPECT_EQ(m.name, entry.path().stem().string());
    EXPECT_FALSE(m.description.empty());
    EXPECT_FALSE(m.gpus.empty());
    for (std::size_t i = 1; i < m.gpus.size(); ++i)
      EXPECT_LT(m.gpus[i - 1].pci_bus_id, m.gpus[i].pci_bus_id);
    ++count;
  }
  EXPECT_GE(count, 10);
}

TEST(Machine, DgxH100) {
  SimMachine m = load_machine(find_machine("dgx-h100", {kMachines}));
  ASSERT_EQ(m.gpus.size(), 8u);
  EXPECT_EQ(m.gpus[0].memory_total, 80ull << 30);
  EXPECT_EQ(m.gpus[0].cpus.size(), 112u);
  EXPECT_EQ(m.gpus[7].numa_node, 1);
  EXPECT_EQ(m.gpus[3].pci_bus_id, "00000000:5D:00.0");
  EXPECT_EQ(fastest_first_order(m), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(Machine, MixedOrderDiffersFromPci) {
  SimMachine m = load_machine(find_machine("workstation-mixed", {kMachines}));
  // 4090 (8.9, 128 SMs) first, then A6000 (8.6, 84), then A4000 (8.6, 48).
  EXPECT_EQ(fastest_first_order(m), (std::vector<int>{1, 2, 0}));
  EXPECT_DOUBLE_EQ(m.gpus[1].speed, derived_speed(8, 9, 128));
}

TEST(Machine, SortsByPciAndHonoursSpeed) {
  std::string text = std::string(kHead) + kGpu;
  std::string second = kGpu;
  second.replace(second.find("81:00.0"), 7, "05:00.0");
  second.replace(second.find("55555555"), 8, "66666666");
  text += second + "speed = 1\n";
  SimMachine m = load_machine(write_temp("sort", text));
  ASSERT_EQ(m.gpus.size(), 2u);
  EXPECT_EQ(m.gpus[0].pci_bus_id, "00000000:05:00.0");
  EXPECT_TRUE(m.gpus[0].speed_given);
  EXPECT_EQ(fastest_first_order(m), (std::vector<int>{1, 0}));
}

TEST(Machine, ErrorsNameFileLineAndKey) {
  std::string gpu = kGpu;
  std::string no_sm = gpu;
  no_sm.erase(no_sm.find("sm_count = 10\n"), 14);
  std::string msg = load_error(std::string(kHead) + no_sm);
  EXPECT_NE(msg.find("gpusel_machine_test_bad.toml:5:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'sm_count'"), std::string::npos) << msg;

  msg = load_error(std::string(kHead) + gpu + "bogus = = 1\n");
  EXPECT_NE(msg.find(":17:"), std::string::npos) << msg;

  std::string bad_uuid = gpu;
  bad_uuid.replace(bad_uuid.find("GPU-1111"), 8, "GPU-xyz1");
  msg = load_error(std::string(kHead) + bad_uuid);
  EXPECT_NE(msg.find(":6:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'uuid'"), std::string::npos) << msg;

  msg = load_error(std::string("name = \"t\"\ncuda_driver_version = 1\n") + gpu);
  EXPECT_NE(msg.find("'driver_version'"), std::string::npos) << msg;

  std::string bad_size = gpu;
  bad_size.replace(bad_size.find("\"16GiB\""), 7, "\"lots\"");
  msg = load_error(std::string(kHead) + bad_size);
  EXPECT_NE(msg.find("'memory_total'"), std::string::npos) << msg;

  msg = load_error(std::string(kHead) + gpu + gpu);
  EXPECT_NE(msg.find("two GPUs share"), std::string::npos) << msg;

  msg = load_error(std::string(kHead) + "[faults]\nnvml = \"sometimes\"\n" + gpu);
  EXPECT_NE(msg.find("'faults.nvml'"), std::string::npos) << msg;

  msg = load_error(kHead);
  EXPECT_NE(msg.find("'gpu'"), std::string::npos) << msg;
}

TEST(Machine, RepeatedGpuNamesWhatItSharesWithTheFirst) {
  // GPU 3 repeats GPU 1's bus id and GPU 2's UUID: the message names GPU 1's (the first).
  auto gpu = [](const char* uuid_tail, const char* bus) {
    std::string g = kGpu;
    g.replace(g.find("555555555555"), 12, uuid_tail);
    g.replace(g.find("81:00.0"), 7, bus);
    return g;
  };
  std::string msg = load_error(std::string(kHead) + gpu("000000000001", "81:00.0") +
                               gpu("000000000002", "82:00.0") + gpu("000000000002", "81:00.0"));
  EXPECT_NE(msg.find(":31: two GPUs share pci_bus_id 00000000:81:00.0"), std::string::npos) << msg;
  msg = load_error(std::string(kHead) + gpu("000000000001", "81:00.0") +
                   gpu("000000000002", "82:00.0") + gpu("000000000001", "82:00.0"));
  EXPECT_NE(msg.find(":31: two GPUs share uuid GPU-11111111-2222-3333-4444-000000000001"),
            std::string::npos)
      << msg;
}

// libgpusel-sim-machines.so's cache (machine_share.hpp): one parse per file and path while the
// file is unchanged.
TEST(SharedMachine, OneMachinePerUnchangedFile) {
  const std::string path = write_temp("shared", std::string(kHead) + kGpu);
  const SimMachine& first = shared_machine(path);
  const SimMachine& again = shared_machine(path);
  EXPECT_EQ(&first, &again);
  EXPECT_EQ(first.path, path);
  ASSERT_EQ(first.gpus.size(), 1u);

  // Rewritten (another size): parsed again; the machine handed out before stays as it was.
  std::string second = kGpu;
  second.replace(second.find("81:00.0"), 7, "05:00.0");
  second.replace(second.find("55555555"), 8, "66666666");
  write_temp("shared", std::string(kHead) + kGpu + second);
  const SimMachine& changed = shared_machine(path);
  EXPECT_NE(&changed, &first);
  EXPECT_EQ(changed.gpus.size(), 2u);
  EXPECT_EQ(first.gpus.size(), 1u);
  EXPECT_EQ(&shared_machine(path), &changed);
}

TEST(SharedMachine, ErrorsAreLoadMachinesErrors) {
  const std::string path = write_temp("shared_bad", std::string(kHead) + "[[gpu]]\nuuid = 5\n");
  std::string expected, got;
  try {
    load_machine(path);
  } catch (const MachineError& e) {
    expected = e.what();
  }
  try {
    shared_machine(path);
  } catch (const MachineError& e) {
    got = e.what();
  }
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(got, expected);
  EXPECT_THROW(shared_machine((temp_dir() / "absent.toml").string()), MachineError);
}

#ifndef _WIN32
TEST(SharedMachine, AnotherPathToTheSameFileHasItsOwnPath) {
  const std::string path = write_temp("shared_linked", std::string(kHead) + kGpu);
  const std::string link = (temp_dir() / "shared_link.toml").string();
  ASSERT_EQ(::symlink(path.c_str(), link.c_str()), 0);
  const SimMachine& by_file = shared_machine(path);
  const SimMachine& by_link = shared_machine(link);
  EXPECT_NE(&by_file, &by_link);
  EXPECT_EQ(by_link.path, link);  // the usage folder is named after the path the double was given
  EXPECT_EQ(by_file.path, path);
  ASSERT_EQ(by_link.gpus.size(), 1u);
  EXPECT_EQ(by_link.gpus[0].uuid, by_file.gpus[0].uuid);
  EXPECT_EQ(&shared_machine(link), &by_link);
}
#endif

TEST(Machine, FindMachine) {
  EXPECT_EQ(find_machine("dgx-h100", {"/nonexistent", kMachines}), kMachines + "/dgx-h100.toml");
  EXPECT_EQ(find_machine("./x.toml", {kMachines}), "./x.toml");
  try {
    find_machine("dgx-h1000", {kMachines});
    ADD_FAILURE();
  } catch (const MachineError& e) {
    EXPECT_NE(std::string(e.what()).find("gpusel sim list"), std::string::npos);
  }
}

// ---- hostile machine files ---------------------------------------------------------------------

namespace {

std::string parse_error(const std::string& text) {
  try {
    parse_machine(text, "hostile.toml");
  } catch (const MachineError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for: " << text.substr(0, 200);
  return "";
}

std::string repeat(const std::string& piece, std::size_t n) {
  std::string out;
  out.reserve(piece.size() * n);
  for (std::size_t i = 0; i < n; ++i) out += piece;
  return out;
}

// The machine file's text with the name (a TOML basic string's contents) replaced.
std::string named(const std::string& toml_name) {
  return "name = \"" + toml_name + "\"\ndriver_version = \"1\"\ncuda_driver_version = 12000\n" +
         kGpu;
}

// One word of POSIX sh made of single-quoted parts, backslash escapes and plain characters: what
// the shell's parse gives for it, or nullopt when it is not exactly one such word.
std::optional<std::string> sh_word(const std::string& text) {
  std::string out;
  std::size_t i = 0;
  if (text.empty()) return std::nullopt;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\'') {
      const std::size_t close = text.find('\'', i + 1);
      if (close == std::string::npos) return std::nullopt;
      out.append(text, i + 1, close - i - 1);
      i = close + 1;
    } else if (c == '\\') {
      if (i + 1 >= text.size() || text[i + 1] == '\n') return std::nullopt;
      out += text[i + 1];
      i += 2;
    } else if (std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_-./:=,+@%", c)) {
      out += c;
      ++i;
    } else {
      return std::nullopt;  // a character the shell would treat specially
    }
  }
  return out;
}

}  // namespace

TEST(HostileMachine, DeepNestingIsRefusedBeforeParsing) {
  // Each of these crashed the TOML parser (and so gpusel and every simulated process) with a
  // stack overflow before the pre-scan.
  const std::size_t deep = 300000;
  for (const std::string& text :
       {std::string(kHead) + "a" + repeat(".a", deep) + " = 1\n",
        std::string(kHead) + "[a" + repeat(".a", deep) + "]\n",
        std::string(kHead) + "x = " + repeat("[", deep) + repeat("]", deep) + "\n",
        std::string(kHead) + "x = " + repeat("{a = ", deep / 3) + "1" + repeat("}", deep / 3) +
            "\n",
        // Nesting that adds up: a dotted key inside inline tables inside an array.
        std::string(kHead) + "x = " + repeat("[{a.a.a.a.a.a.a.a = ", 30) + "1" + repeat("}]", 30) +
            "\n"}) {
    const std::string msg = parse_error(text);
    EXPECT_NE(msg.find("hostile.toml:4:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("nest more than 64 levels"), std::string::npos) << msg;
  }
  // Dots, brackets and braces inside strings and comments are not nesting.
  const std::string dotted = repeat(".[{", 500);
  const std::string q3 = "\"\"\"", l3 = "'''";
  SimMachine m =
      parse_machine(std::string(kHead) + "description = \"" + dotted + "\\\"\"\n" + "# " + dotted +
                        "\n" + "x = '" + dotted + "'\n" + "y = " + q3 + dotted + "\n\\\"" + dotted +
                        q3 + "\n" + "z = " + l3 + dotted + "\n" + dotted + l3 + "'\n" + kGpu,
                    "ok.toml");
  EXPECT_EQ(m.description, dotted + "\"");
  // Legitimate nesting well within the cap still parses.
  parse_machine(std::string(kHead) + "x = " + repeat("[", 30) + repeat("]", 30) + "\n" + "y" +
                    repeat(".y", 30) + " = 1\n" + kGpu,
                "ok.toml");
}

TEST(HostileMachine, OnlyBoundedRegularFiles) {
  const auto expect_refused = [](const std::string& path, const std::string& what) {
    try {
      load_machine(path);
      ADD_FAILURE() << path << " loaded";
    } catch (const MachineError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_NE(msg.find("at most 1 MiB"), std::string::npos) << msg;
    }
  };
  expect_refused(temp_dir().string(), "a folder");
#ifndef _WIN32
  expect_refused("/dev/zero", "character device");  // read forever
  const std::string fifo = (temp_dir() / "fifo.toml").string();
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_refused(fifo, "a FIFO");  // blocked in open() waiting for a writer
#endif
  // A regular file of exactly the limit loads; one byte more does not.
  std::string big = std::string(kHead) + kGpu;
  big += "#" + std::string(kMaxMachineFileBytes - big.size() - 2, 'x') + "\n";
  ASSERT_EQ(big.size(), kMaxMachineFileBytes);
  EXPECT_NO_THROW(load_machine(write_temp("limit", big)));
  expect_refused(write_temp("big", big + "\n"), "is 1048577 bytes");
  EXPECT_THROW(find_machine("no-such-machine", {temp_dir().string()}), MachineError);
}

TEST(HostileMachine, NamesWithControlCharactersAreRefused) {
  // TOML escapes: a newline, a carriage return, a tab, an OSC sequence, C1 NEL, DEL, NUL.
  for (const char* name :
       {"a\\nb", "x\\r", "\\t", "\\u001b]0;owned\\u0007", "\\u0085", "\\u007f", "\\u0000"}) {
    const std::string msg = parse_error(named(name));
    EXPECT_EQ(msg.rfind("hostile.toml:1: key 'name' holds a control character", 0), 0u) << msg;
    EXPECT_NE(msg.find("printable"), std::string::npos) << msg;
  }
  // Quotes, $(...) and non-ASCII letters are fine: sim env quotes them.
  EXPECT_EQ(parse_machine(named("it's $(touch x) `y` \\\"z\\\" \\u00e9"), "ok.toml").name,
            "it's $(touch x) `y` \"z\" \xc3\xa9");
}

TEST(HostileMachine, ComputeCapabilityIsBounded) {
  const std::string good = kGpu;
  for (const char* cc : {"2147483647.0", "4294967296.0", "9.2147483648", "100.0", "0.0", "-1.0",
                         "+9.0", "9.-1", "9", "9.", ".9", "9.0x", " 9.0", "9.0.1", "9,0"}) {
    std::string gpu = good;
    gpu.replace(gpu.find("\"8.0\""), 5, std::string("\"") + cc + "\"");
    const std::string msg = parse_error(std::string(kHead) + gpu);
    EXPECT_NE(msg.find("'compute_capability'"), std::string::npos) << cc << ": " << msg;
  }
  for (const char* cc : {"1.0", "12.1", "99.99", "10.3"}) {
    std::string gpu = good;
    gpu.replace(gpu.find("\"8.0\""), 5, std::string("\"") + cc + "\"");
    EXPECT_NO_THROW(parse_machine(std::string(kHead) + gpu, "ok.toml")) << cc;
  }
  // The FASTEST_FIRST key never overflows (UBSan checks this), whatever it is given.
  EXPECT_TRUE(std::isfinite(derived_speed(INT_MAX, INT_MAX, INT_MAX)));
  EXPECT_GT(derived_speed(99, 99, INT_MAX), derived_speed(99, 98, INT_MAX));
  for (const char* speed : {"nan", "inf", "-inf"}) {
    const std::string msg = parse_error(std::string(kHead) + kGpu + "speed = " + speed + "\n");
    EXPECT_NE(msg.find("'speed'"), std::string::npos) << msg;
  }
}

TEST(HostileMachine, ShellQuoteRoundTrips) {
  for (const std::string& value :
       {std::string(""), std::string("plain"), std::string("it's"), std::string("''"),
        std::string("$(touch /tmp/x)`id`"), std::string("a\nb\\c"), std::string("\\'\\'"),
        std::string(" \t;&|<>*?[]{}~#!\"")}) {
    const std::string quoted = gpusel::detail::shell_quote(value);
    EXPECT_EQ(sh_word(quoted), value) << quoted;
  }
}

#ifndef _WIN32  // fork and dlopen; tests/windows covers the Windows doubles
// The CUDA double from eight threads at once: initialising (half the threads poll without calling
// cuInit, as a program's helper threads may), binding through gpusel and copying. Under
// ThreadSanitizer (the tsan preset) a data race fails the test.
TEST(CudaDouble, EightThreadsInitialiseBindAndCopy) {
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe");
  const std::filesystem::path sim = exe.parent_path().parent_path() / "lib" / "gpusel" / "sim";
  if (!std::filesystem::exists(sim / "libcuda.so.1")) GTEST_SKIP() << "no simulator in " << sim;
  // In a child: the process-wide driver state stays out of the other tests' way.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    for (const char* name : {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "GPUSEL_GPUS",
                             "GPUSEL_GPU", "LOCAL_RANK", "SLURM_LOCALID"})
      ::unsetenv(name);
    ::setenv("GPUSEL_SIM_MACHINE", (kMachines + "/dgx-h100.toml").c_str(), 1);
    ::setenv("GPUSEL_SIM_DEVICE_HANDLES", "distinct", 1);  // handles that are not ordinals
    ::setenv("GPUSEL_CUDA_LIBRARY", (sim / "libcuda.so.1").c_str(), 1);
    ::setenv("GPUSEL_NVML_LIBRARY", (sim / "libnvidia-ml.so.1").c_str(), 1);
    void* lib = ::dlopen((sim / "libcuda.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) ::_exit(10);
    using Ctx = void*;
    using Ptr = unsigned long long;
    auto sym = [&](const char* name) {
      void* f = ::dlsym(lib, name);
      if (f == nullptr) ::_exit(11);
      return f;
    };
    auto cuInit = reinterpret_cast<int (*)(unsigned)>(sym("cuInit"));
    auto cuDeviceGetCount = reinterpret_cast<int (*)(int*)>(sym("cuDeviceGetCount"));
    auto cuDeviceGet = reinterpret_cast<int (*)(int*, int)>(sym("cuDeviceGet"));
    auto retain = reinterpret_cast<int (*)(Ctx*, int)>(sym("cuDevicePrimaryCtxRetain"));
    auto release = reinterpret_cast<int (*)(int)>(sym("cuDevicePrimaryCtxRelease_v2"));
    auto set_current = reinterpret_cast<int (*)(Ctx)>(sym("cuCtxSetCurrent"));
    auto synchronize = reinterpret_cast<int (*)()>(sym("cuCtxSynchronize"));
    auto alloc = reinterpret_cast<int (*)(Ptr*, std::size_t)>(sym("cuMemAlloc_v2"));
    auto free_ = reinterpret_cast<int (*)(Ptr)>(sym("cuMemFree_v2"));
    auto htod = reinterpret_cast<int (*)(Ptr, const void*, std::size_t)>(sym("cuMemcpyHtoD_v2"));
    auto dtoh = reinterpret_cast<int (*)(void*, Ptr, std::size_t)>(sym("cuMemcpyDtoH_v2"));
    std::atomic<int> failures{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        auto fail = [&] { failures.fetch_add(1); };
        int count = 0;
        if (t % 2 == 0) {
          if (cuInit(0) != 0) return fail();
        } else {
          while (cuDeviceGetCount(&count) != 0) std::this_thread::yield();
        }
        if (cuDeviceGetCount(&count) != 0 || count != 8) return fail();
        try {
          if (gpusel::bind_assigned_gpu() != 0) return fail();
        } catch (const std::exception&) {
          return fail();
        }
        std::vector<unsigned char> out(4096), in(4096);
        for (int round = 0; round < 20; ++round) {
          int dev = 0;  // a CUdevice, from cuDeviceGet (the double's are not ordinals)
          if (cuDeviceGet(&dev, (t + round) % count) != 0) return fail();
          Ctx ctx = nullptr;
          if (retain(&ctx, dev) != 0 || set_current(ctx) != 0) return fail();
          for (std::size_t i = 0; i < out.size(); ++i)
            out[i] = static_cast<unsigned char>(i * 7 + static_cast<std::size_t>(t + round));
          Ptr p = 0;
          if (alloc(&p, out.size()) != 0 || htod(p, out.data(), out.size()) != 0 ||
              dtoh(in.data(), p, in.size()) != 0 || synchronize() != 0 || free_(p) != 0)
            return fail();
          if (in != out) return fail();
          if (set_current(nullptr) != 0 || release(dev) != 0) return fail();
        }
      });
    }
    go.store(true);
    for (auto& th : threads) th.join();
    ::_exit(failures.load() == 0 ? 0 : 12);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child ended by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: no library, 11: a missing symbol, 12: a call failed, "
                                       "66: ThreadSanitizer found a data race (see above)";
}
#endif

// toml++ 3.3 reaches __builtin_unreachable when it asks whether some non-ASCII characters are
// whitespace (found by fuzz_machine_file; marzer/tomlplusplus#190): those places are refused first.
TEST(HostileMachine, NonAsciiWhereTomlPlusPlusMisbehavesIsRefused) {
  for (const std::string& text :
       {std::string("''\xc5\xa5''|@\n"), std::string("x = 1 \xc2\xa7\n"),
        std::string("\xc3\xa9 = 1\n"), std::string("s = \"\"\"\\\n\xc2\xa7\"\"\"\n"),
        std::string("s = \"\"\"\\  \r\n \n \xc2\xa7\"\"\"\n"),
        std::string("s = \"\"\"\\\xc2\xa7\"\"\"\n")}) {
    const std::string msg = parse_error(std::string(kHead) + text + kGpu);
    EXPECT_NE(msg.find("hostile.toml:4: a non-ASCII character"), std::string::npos) << msg;
  }
  // Where TOML allows them, they are fine.
  SimMachine m =
      parse_machine(std::string(kHead) + "description = \"\xc2\xa7\\\\\xc2\xa7\"\n# \xc2\xa7\n" +
                        "x = '''\\\n\xc2\xa7'''\ny = \"\"\"\\n\xc2\xa7\"\"\"\n" + kGpu,
                    "ok.toml");
  EXPECT_EQ(m.description, "\xc2\xa7\\\xc2\xa7");
}
