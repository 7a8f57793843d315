// Leases on Windows: the same rules as lease.cpp, made of LockFileEx locks (win_lock.hpp) instead
// of flock. The folder is GPUSEL_LEASE_DIR, else %ProgramData%\gpusel-leases (shared by every user
// of the machine, as /tmp/gpusel-leases is on Linux). A lease file is never followed through a
// symbolic link or junction. Windows has no /proc/locks: the holder writes its process id at the
// start of the file (outside the locked byte) and others read it from there, so the holder named
// in messages is what the holder wrote; the lease itself is the lock, which a file's contents
// cannot fake. Process details (command, start time) come from the process where Windows lets us
// open it; the user is not read.
#include <io.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "env.hpp"
#include "gpusel/error.hpp"
#include "gpusel/lease.hpp"
#include "gpusel/resolve.hpp"
#include "text.hpp"
#include "win_lock.hpp"

GPUSEL_BEGIN_NAMESPACE

namespace {

namespace win = detail::win;

std::string lease_path(const std::string& dir, const std::string& uuid) {
  if (!detail::is_plain_file_name(uuid)) {
    throw failure(
        "cannot lease GPU " + quote_value(uuid) +
        ": not a GPU UUID (letters, digits and dashes), as the NVIDIA driver reported it");
  }
  return dir + "\\" + uuid + ".lock";
}

// The pid a holder wrote at the start of its lease file; nullopt when none can be read.
std::optional<int> written_pid(HANDLE file) {
  char buf[24] = {};
  DWORD got = 0;
  OVERLAPPED at{};
  if (!ReadFile(file, buf, sizeof buf - 1, &got, &at) || got == 0) return std::nullopt;
  const long pid = std::strtol(buf, nullptr, 10);
  return pid > 0 ? std::optional<int>(static_cast<int>(pid)) : std::nullopt;
}

}  // namespace

LeaseHolder process_details(int pid) {
  LeaseHolder h;
  h.pid = pid;
  win::Handle process(
      OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, static_cast<DWORD>(pid)));
  if (!process) return h;
  wchar_t name[MAX_PATH * 4];
  DWORD size = sizeof name / sizeof name[0];
  if (QueryFullProcessImageNameW(process.get(), 0, name, &size))
    h.command = win::narrow(std::wstring(name, size));
  FILETIME created{}, exited{}, kernel{}, user{};
  SYSTEMTIME utc{}, local{};
  if (GetProcessTimes(process.get(), &created, &exited, &kernel, &user) &&
      FileTimeToSystemTime(&created, &utc) &&
      SystemTimeToTzSpecificLocalTime(nullptr, &utc, &local)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04u-%02u-%02u %02u:%02u:%02u", local.wYear, local.wMonth,
                  local.wDay, local.wHour, local.wMinute, local.wSecond);
    h.started = buf;
  }
  return h;
}

std::string lease_directory() {
  if (auto dir = gpusel::detail::env_value("GPUSEL_LEASE_DIR"); dir && !dir->empty()) return *dir;
  const auto data = win::environment(L"ProgramData");
  return win::narrow(data && !data->empty() ? *data : std::wstring(L"C:\\ProgramData")) +
         "\\gpusel-leases";
}

void check_lease_directory(const std::string& dir) {
  const std::filesystem::path p(win::widen(dir));
  std::error_code ec;
  auto st = std::filesystem::symlink_status(p, ec);
  if (ec || !std::filesystem::exists(st)) {
    std::filesystem::create_directories(p, ec);
    if (ec) {
      throw failure("cannot create the lease folder " + dir + ": " + ec.message() +
                    "; set GPUSEL_LEASE_DIR to a folder you can use");
    }
    st = std::filesystem::symlink_status(p, ec);
  }
  const DWORD attributes = GetFileAttributesW(p.c_str());
  if (attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_REPARSE_POINT)) {
    throw failure("the lease folder " + dir +
                  " is a symbolic link or junction; gpusel does not follow one there: use the "
                  "real folder in GPUSEL_LEASE_DIR");
  }
  if (!std::filesystem::is_directory(st)) {
    throw failure("the lease folder " + dir + " is not a folder; set GPUSEL_LEASE_DIR to one");
  }
}

// A lease's descriptor is a C runtime descriptor over the file's handle (_open_osfhandle), so
// the class is the same on both platforms; closing it closes the handle, which drops the lock.
Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) _close(fd_);
    fd_ = other.fd_;
    uuid_ = std::move(other.uuid_);
    other.fd_ = -1;
  }
  return *this;
}

Lease::~Lease() {
  if (fd_ >= 0) _close(fd_);
}

std::optional<Lease> try_lease(const std::string& dir, const std::string& uuid,
                               std::optional<LeaseHolder>* holder) {
  const std::string path = lease_path(dir, uuid);
  std::string error;
  bool writable = false;
  win::Handle file = win::open_lock_file(path, true, error, &writable);
  if (!file) {
    throw failure("cannot open the lease file " + path + ": " + error +
                  "; check the lease folder's permissions, or set GPUSEL_LEASE_DIR");
  }
  DWORD code = 0;
  bool locked = false;
  // A few quick tries: lease_holder's test lock (list, doctor) holds the byte for a moment.
  for (int attempt = 0; attempt < 3 && !locked; ++attempt) {
    if (attempt > 0) Sleep(2);
    locked = win::try_lock(file.get(), true, &code);
    if (!locked && code != ERROR_LOCK_VIOLATION && code != ERROR_IO_PENDING) break;
  }
  if (!locked) {
    if (code != ERROR_LOCK_VIOLATION && code != ERROR_IO_PENDING) {
      throw failure("cannot lock the lease file " + path + ": " + win::error_text(code));
    }
    if (holder != nullptr) {
      const auto pid = written_pid(file.get());
      *holder = pid ? std::optional<LeaseHolder>(process_details(*pid)) : std::nullopt;
    }
    return std::nullopt;
  }
  if (writable) {
    const std::string text = std::to_string(GetCurrentProcessId()) + "\n";
    OVERLAPPED at{};
    DWORD written = 0;
    WriteFile(file.get(), text.data(), static_cast<DWORD>(text.size()), &written, &at);
    SetFilePointer(file.get(), static_cast<LONG>(text.size()), nullptr, FILE_BEGIN);
    SetEndOfFile(file.get());
  }
  const int fd = _open_osfhandle(reinterpret_cast<intptr_t>(file.get()), 0);
  if (fd < 0) throw failure("cannot hold the lease file " + path);
  file.release();  // the descriptor owns the handle now
  return Lease(fd, uuid);
}

std::optional<LeaseHolder> lease_holder(const std::string& dir, const std::string& uuid) {
  if (!detail::is_plain_file_name(uuid)) return std::nullopt;  // never leasable, so never leased
  std::string error;
  win::Handle file = win::open_lock_file(lease_path(dir, uuid), false, error);
  if (!file) return std::nullopt;
  // A shared lock is refused while someone holds the exclusive one (and taking it for a moment
  // makes a concurrent taker's exclusive lock fail only in that moment, as a retry would).
  if (win::try_lock(file.get(), false)) {
    win::unlock(file.get());
    return std::nullopt;
  }
  const auto pid = written_pid(file.get());
  LeaseHolder h = pid ? process_details(*pid) : LeaseHolder{};
  return h;
}

GPUSEL_END_NAMESPACE
