// usage.hpp on Windows: the processes with a context on a simulated GPU are shared between the
// Windows doubles as on Linux, one file per process and GPU, kept locked by its process. The lock
// is LockFileEx on one byte far past the file's end (the text at its start stays readable), and
// Windows drops a process's locks when it ends, however it ends: an entry nobody holds belongs to
// a process that is gone, and a reader removes it.
//
// The folder: GPUSEL_SIM_STATE_DIR itself, else %TEMP%\gpusel-sim\<hash of the machine file> (the
// user's own temporary folder, which other users cannot write). An entry is made under a name
// readers skip, locked, then renamed into place, so no reader finds it unlocked in between.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "sim_common.hpp"
#include "text.hpp"
#include "usage.hpp"
#include "win.hpp"

namespace gpusel::sim {
namespace {

namespace win = detail::win;

std::mutex entries_mutex;
std::map<std::string, HANDLE> entries;  // this process's entry per GPU folder, locked
bool reported = false;                  // the unusable folder was reported (under the mutex)

// The locked byte: past any text an entry holds.
constexpr DWORD kLockOffsetHigh = 1;

bool lock_entry(HANDLE file, DWORD flags) {
  OVERLAPPED at{};
  at.OffsetHigh = kLockOffsetHigh;
  return LockFileEx(file, flags | LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &at) != 0;
}

void unlock_entry(HANDLE file) {
  OVERLAPPED at{};
  at.OffsetHigh = kLockOffsetHigh;
  UnlockFileEx(file, 0, 1, 0, &at);
}

// Removes the file `file` was opened on (with DELETE access), not whatever its name holds by now:
// a process that took the same pid may have renamed its own entry into that name meanwhile.
void remove_opened(HANDLE file) {
  unlock_entry(file);
  FILE_DISPOSITION_INFO disposition{};
  disposition.DeleteFile = TRUE;
  SetFileInformationByHandle(file, FileDispositionInfo, &disposition, sizeof disposition);
}

void remove_path(const std::wstring& path) {
  win::Handle file(CreateFileW(path.c_str(), DELETE,
                               FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                               OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr));
  if (file) remove_opened(file.get());
}

// ".<pid>.new" left by a process that ended between making its entry and renaming it into place
// (readers skip those names otherwise): its pid names no running process.
bool is_stale_fresh_entry(const std::string& name) {
  if (name.size() < 6 || name[0] != '.' || name.compare(name.size() - 4, 4, ".new") != 0)
    return false;
  const std::string digits = name.substr(1, name.size() - 5);
  if (digits.empty() || digits.size() > 10 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return false;
  const auto pid = static_cast<DWORD>(std::strtoul(digits.c_str(), nullptr, 10));
  win::Handle process(OpenProcess(SYNCHRONIZE, FALSE, pid));
  return !process || WaitForSingleObject(process.get(), 0) == WAIT_OBJECT_0;
}

std::string base_dir(bool* named) {
  *named = false;
  if (auto dir = win::environment(L"GPUSEL_SIM_STATE_DIR"); dir && !dir->empty()) {
    *named = true;
    return win::narrow(*dir);
  }
  wchar_t temp[MAX_PATH + 1];
  const DWORD n = GetTempPathW(MAX_PATH + 1, temp);
  std::string base = n > 0 && n <= MAX_PATH ? win::narrow(std::wstring(temp, n)) : ".\\";
  if (base.back() != '\\' && base.back() != '/') base += '\\';
  return base + "gpusel-sim";
}

bool make_folder(const std::string& path) {
  const std::wstring wide = win::widen(path);
  if (CreateDirectoryW(wide.c_str(), nullptr) || GetLastError() == ERROR_ALREADY_EXISTS) {
    const DWORD a = GetFileAttributesW(wide.c_str());
    return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY) != 0 &&
           (a & FILE_ATTRIBUTE_REPARSE_POINT) == 0;
  }
  return false;
}

// The GPU's folder (made where missing), or "" when it cannot be used (said once per process).
std::string gpu_dir(const SimMachine& machine, const std::string& uuid, const char* library) {
  bool named = false;
  const std::string base = base_dir(&named);
  const std::string machine_dir = usage_dir(machine);
  const std::string dir = machine_dir + "\\" + uuid;
  if (make_folder(base) && make_folder(machine_dir) && make_folder(dir)) return dir;
  if (library != nullptr && !reported) {
    reported = true;
    report(library, "the folder for usage shared between simulated processes, " + dir +
                        ", cannot be made or is not a plain folder; usage of other processes is "
                        "not shown and this one's is not recorded. Set GPUSEL_SIM_STATE_DIR to a "
                        "folder of your own" +
                        (named ? " (it is set to \"" + base + "\")" : std::string()));
  }
  return "";
}

}  // namespace

unsigned own_pid() {
  return static_cast<unsigned>(GetCurrentProcessId());
}

std::string usage_dir(const SimMachine& machine) {
  bool named = false;
  const std::string base = base_dir(&named);
  return named ? base : base + "\\" + usage_machine_key(machine);
}

void note_usage(const SimMachine& machine, const std::string& uuid, std::uint64_t bytes,
                const char* library) {
  if (!detail::is_plain_file_name(uuid)) return;
  std::lock_guard<std::mutex> hold(entries_mutex);
  const std::string key = usage_dir(machine) + "\\" + uuid;
  auto it = entries.find(key);
  if (it == entries.end()) {
    const std::string dir = gpu_dir(machine, uuid, library);
    if (dir.empty()) return;
    const std::string name = std::to_string(GetCurrentProcessId());
    const std::wstring fresh = win::widen(dir + "\\." + name + ".new");
    const std::wstring final_name = win::widen(dir + "\\" + name);
    win::Handle file(CreateFileW(fresh.c_str(), GENERIC_READ | GENERIC_WRITE | DELETE,
                                 FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                                 CREATE_ALWAYS, FILE_ATTRIBUTE_NORMAL, nullptr));
    if (!file) return;
    if (!lock_entry(file.get(), LOCKFILE_EXCLUSIVE_LOCK) ||
        !MoveFileExW(fresh.c_str(), final_name.c_str(), MOVEFILE_REPLACE_EXISTING)) {
      file.reset();
      DeleteFileW(fresh.c_str());
      return;
    }
    it = entries.emplace(key, file.release()).first;
  }
  char text[32];
  const int n = std::snprintf(text, sizeof text, "%llu\n", static_cast<unsigned long long>(bytes));
  LARGE_INTEGER start{};
  DWORD written = 0;
  if (n > 0 && SetFilePointerEx(it->second, start, nullptr, FILE_BEGIN) &&
      WriteFile(it->second, text, static_cast<DWORD>(n), &written, nullptr)) {
    SetEndOfFile(it->second);
  }
}

std::vector<SimProcess> live_processes(const SimMachine& machine, const std::string& uuid,
                                       const char* library) {
  std::vector<SimProcess> out;
  if (!detail::is_plain_file_name(uuid)) return out;
  std::string dir;
  {
    std::lock_guard<std::mutex> hold(entries_mutex);
    dir = gpu_dir(machine, uuid, library);
  }
  if (dir.empty()) return out;
  WIN32_FIND_DATAW found{};
  HANDLE search = FindFirstFileW(win::widen(dir + "\\*").c_str(), &found);
  if (search == INVALID_HANDLE_VALUE) return out;
  do {
    const std::string name = win::narrow(found.cFileName);
    if (is_stale_fresh_entry(name)) {
      remove_path(win::widen(dir + "\\" + name));
      continue;
    }
    if (name.empty() || name.size() > 10 ||
        name.find_first_not_of("0123456789") != std::string::npos ||
        (found.dwFileAttributes & (FILE_ATTRIBUTE_DIRECTORY | FILE_ATTRIBUTE_REPARSE_POINT)) != 0)
      continue;
    const std::wstring path = win::widen(dir + "\\" + name);
    win::Handle file(CreateFileW(path.c_str(), GENERIC_READ | DELETE,
                                 FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                                 OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr));
    if (!file) continue;
    if (lock_entry(file.get(), 0)) {  // nobody holds it: its process is gone
      remove_opened(file.get());
      continue;
    }
    char text[32] = {};
    DWORD got = 0;
    (void)ReadFile(file.get(), text, sizeof text - 1, &got, nullptr);
    SimProcess p;
    p.pid = static_cast<unsigned>(std::strtoul(name.c_str(), nullptr, 10));
    p.used_memory = kContextBytes + (got > 0 ? std::strtoull(text, nullptr, 10) : 0);
    out.push_back(p);
  } while (FindNextFileW(search, &found));
  FindClose(search);
  return out;
}

// Not kept on Windows: the static runtime note serves Linux's `gpusel doctor`.
void note_static_runtime(const SimMachine&, const char*, const std::string&) {}

std::string static_runtime_note(const SimMachine&) {
  return "";
}

}  // namespace gpusel::sim
