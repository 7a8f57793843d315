// Machine files read once per process. libgpusel-sim-machines.so keeps every machine it parses;
// the doubles (libnvidia-ml.so.1, libcuda.so.1, and so the simulated runtime over libcuda) and
// `gpusel --sim` take theirs from it, so a process that loads several of them parses each machine
// file once. The doubles open the library by its path beside themselves (sim_common.cpp) and use
// the SimMachine it hands out in place: all of them are built together from one tree, and the
// layout number below (checked before any machine is taken) refuses a library from another build.
#pragma once

#include <cstdint>
#include <string>

#include "machine.hpp"

namespace gpusel::sim {

// The library's file name, in the simulator's folder (the doubles also look one folder up, from
// the fault folders no-nvml, no-cuda and nvml-no-v2).
#ifdef _WIN32
inline constexpr char kMachinesLibrary[] = "gpusel-sim-machines.dll";
#else
inline constexpr char kMachinesLibrary[] = "libgpusel-sim-machines.so";
#endif

// Raise when SimMachine, SimGpu or what they hold change in a way their sizes do not show (a
// member's type or order).
inline constexpr std::uint64_t kMachineLayoutRevision = 5;
// What both sides of the library's boundary must agree on.
inline constexpr std::uint64_t kMachineLayout =
    (kMachineLayoutRevision << 56) ^ (std::uint64_t{sizeof(SimMachine)} << 40) ^
    (std::uint64_t{sizeof(SimGpu)} << 24) ^ (std::uint64_t{sizeof(SimMig)} << 12) ^
    (std::uint64_t{sizeof(SimFaults)} << 6) ^ std::uint64_t{sizeof(SimProcess)};

// The library's C entry points, by name and type.
//   gpuselSimMachineLayout(): its kMachineLayout.
//   gpuselSimSharedMachine(path, fail, context): the machine in `path`, valid until the process
//   ends; nullptr after calling fail(context, message) with load_machine's message when the file
//   cannot be used.
inline constexpr char kMachineLayoutSymbol[] = "gpuselSimMachineLayout";
inline constexpr char kSharedMachineSymbol[] = "gpuselSimSharedMachine";
using MachineLayoutFunction = std::uint64_t (*)();
using FailFunction = void (*)(void* context, const char* message);
using SharedMachineFunction = const SimMachine* (*)(const char* path, FailFunction fail,
                                                    void* context);

// In the library: the machine in `path`. Parsed the first time; later calls get the same machine
// while the file is unchanged (the same path, and the same size and modification time; on POSIX
// also the same device, inode and change time). The same file under another path is copied from
// the machine already parsed, with its own path (the usage folder is named after it). A changed
// file is parsed again; machines already handed out stay as they were. Throws MachineError as
// load_machine does. Thread-safe.
const SimMachine& shared_machine(const std::string& path);

}  // namespace gpusel::sim
