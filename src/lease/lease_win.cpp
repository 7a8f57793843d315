// Leases on Windows: the same rules as lease.cpp, made of LockFileEx locks (win_lock.hpp) instead
// of flock. The folder is GPUSEL_LEASE_DIR, else %ProgramData%\gpusel-leases (one folder for every
// user of the machine; unlike Linux's shared store, its trust rests on the folder's ACL as Windows
// made it, which gpusel does not check: see docs/windows.md). A lease file is never followed
// through a symbolic link or junction. Windows has no /proc/locks: the holder writes its process id
// at the start of the file (outside the locked byte) and others read it from there, so the holder
// named in messages is what the holder wrote; the lease itself is the lock, which a file's contents
// cannot fake. Process details (command, start time) come from the process where Windows lets us
// open it; the user is not read.
#include <io.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "env.hpp"
#include "gpusel/error.hpp"
#include "gpusel/lease.hpp"
#include "gpusel_detail.hpp"
#include "lease_queue.hpp"
#include "text.hpp"
#include "win_lock.hpp"

// After windows.h (through win.hpp), which it needs.
#include <tlhelp32.h>

GPUSEL_BEGIN_NAMESPACE

namespace {

namespace win = detail::win;

std::string lease_path(const std::string& dir, const std::string& uuid) {
  if (!detail::is_plain_file_name(uuid)) {
    throw failure(
        "cannot lease GPU " + detail::quote_value(uuid) +
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

namespace {

// The lease folder: GPUSEL_LEASE_DIR, else %ProgramData%\gpusel-leases. Made when absent; never
// a reparse point (a symbolic link or junction).
std::string lease_folder() {
  if (auto dir = gpusel::detail::env_value("GPUSEL_LEASE_DIR"); dir && !dir->empty()) return *dir;
  const auto data = win::environment(L"ProgramData");
  return win::narrow(data && !data->empty() ? *data : std::wstring(L"C:\\ProgramData")) +
         "\\gpusel-leases";
}

void check_folder(const std::string& dir) {
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

}  // namespace

LeaseStore LeaseStore::at(const std::string& dir) {
  check_folder(dir);
  LeaseStore s;
  s.dir_ = s.own_dir_ = dir;
  s.shared_ = true;  // one folder for every user of the machine (see docs/windows.md)
  s.own_primary_ = true;
  return s;
}

LeaseStore LeaseStore::locate() {
  return at(lease_folder());
}

// One folder for every user: leases bind every user's jobs, nothing to say.
std::string LeaseStore::scope_note() const {
  return {};
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

std::optional<Lease> LeaseStore::take(const std::string& uuid, LeaseStanding* standing) const {
  LeaseStanding local;
  LeaseStanding& s = standing != nullptr ? *standing : local;
  s = LeaseStanding{};
  s.shared = true;
  if (!detail::is_plain_file_name(uuid)) {
    s.state = LeaseStanding::State::Unusable;
    s.problem = detail::quote_value(uuid) + " is not a GPU UUID as the NVIDIA driver reports one";
    return std::nullopt;
  }
  const std::string path = lease_path(dir_, uuid);
  s.path = path;
  std::string error;
  bool writable = false;
  win::Handle file = win::open_lock_file(path, true, error, &writable);
  if (!file) {
    s.state = LeaseStanding::State::Unusable;
    s.problem = "cannot open " + path + ": " + error;
    return std::nullopt;
  }
  DWORD code = 0;
  bool locked = false;
  // A few quick tries: a look at the lease (list, doctor) holds the byte for a moment.
  for (int attempt = 0; attempt < 3 && !locked; ++attempt) {
    if (attempt > 0) Sleep(2);
    locked = win::try_lock(file.get(), true, &code);
    if (!locked && code != ERROR_LOCK_VIOLATION && code != ERROR_IO_PENDING) break;
  }
  if (!locked) {
    if (code != ERROR_LOCK_VIOLATION && code != ERROR_IO_PENDING) {
      s.state = LeaseStanding::State::Unusable;
      s.problem = "cannot lock " + path + ": " + win::error_text(code);
      return std::nullopt;
    }
    s.state = LeaseStanding::State::Held;
    if (const auto pid = written_pid(file.get())) s.holder = detail::process_details(*pid);
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
  if (fd < 0) {
    s.state = LeaseStanding::State::Unusable;
    s.problem = "cannot hold " + path;
    return std::nullopt;
  }
  file.release();  // the descriptor owns the handle now
  return Lease(fd, uuid);
}

std::vector<LeaseStanding> LeaseStore::standings(const std::vector<std::string>& uuids,
                                                 Look) const {
  std::vector<LeaseStanding> out;
  for (const std::string& uuid : uuids) {
    LeaseStanding s;
    s.shared = true;
    if (!detail::is_plain_file_name(uuid)) {
      out.push_back(s);
      continue;
    }
    s.path = lease_path(dir_, uuid);
    std::string error;
    win::Handle file = win::open_lock_file(s.path, false, error);
    // A shared lock is refused while someone holds the exclusive one (and taking it for a moment
    // makes a concurrent taker's exclusive lock fail only in that moment, as a retry would).
    if (file) {
      if (win::try_lock(file.get(), false)) {
        win::unlock(file.get());
      } else {
        s.state = LeaseStanding::State::Held;
        if (const auto pid = written_pid(file.get())) s.holder = detail::process_details(*pid);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

// Whether `pid` is this process or one of its ancestors, from one snapshot of the processes.
bool ancestor_or_self(int pid) {
  HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
  if (snap == INVALID_HANDLE_VALUE) return false;
  std::map<DWORD, DWORD> parent;
  PROCESSENTRY32W e{};
  e.dwSize = sizeof e;
  for (BOOL ok = Process32FirstW(snap, &e); ok; ok = Process32NextW(snap, &e)) {
    parent[e.th32ProcessID] = e.th32ParentProcessID;
  }
  CloseHandle(snap);
  DWORD p = GetCurrentProcessId();
  for (int depth = 0; depth < 64; ++depth) {
    if (p == static_cast<DWORD>(pid)) return true;
    const auto it = parent.find(p);
    if (it == parent.end() || it->second == 0 || it->second == p) break;
    p = it->second;
  }
  return false;
}

// The claims this process holds: kept until it ends (Windows drops the locks then).
std::vector<Lease> held_claims;
std::mutex held_claims_mutex;

}  // namespace

// Two locks, as on Linux: the GPU's lease file keeps other jobs off the GPU (a job that started
// this process holds it already), then <UUID>-claim.lock keeps two processes of one job off one
// GPU. Windows locks belong to the process that took them, so a worker's claim does not pass to
// the processes it starts; and sharing processes take no claim of their own.
ClaimResult LeaseStore::claim(const std::string& uuid, bool share) const {
  ClaimResult out;
  LeaseStanding s;
  std::optional<Lease> lease = take(uuid, &s);
  if (lease) {
    std::lock_guard<std::mutex> lock(held_claims_mutex);
    held_claims.push_back(std::move(*lease));
  } else if (s.state == LeaseStanding::State::Unusable) {
    out.unusable = unusable_claim(s.problem, s.path);
    return out;
  } else if (!(s.holder && ancestor_or_self(s.holder->pid))) {
    out.other = s.holder;
    out.beside = share;
    out.leased_elsewhere = !share;
    out.leased_by_other_job = s.holder;
    return out;
  }
  if (share) {
    out.claimed = true;
    return out;
  }
  LeaseStanding c;
  std::optional<Lease> claim = take(uuid + "-claim", &c);
  if (claim) {
    std::lock_guard<std::mutex> lock(held_claims_mutex);
    held_claims.push_back(std::move(*claim));
    out.claimed = true;
    return out;
  }
  if (c.state == LeaseStanding::State::Unusable) {
    out.claimed = true;  // the job's lease still keeps other jobs off the GPU
    out.unusable = unusable_claim(
        c.problem + " (two processes of one job on this GPU are not told apart)", c.path);
    return out;
  }
  out.other = c.holder;
  return out;
}

StoreSetup set_up_shared_store(const std::string& dir, const std::vector<std::string>&) {
  throw failure(
      "gpusel setup makes the shared lease store of Linux machines; on Windows the lease "
      "folder " +
      dir + " is used as it is (see docs/windows.md)");
}

GPUSEL_END_NAMESPACE

// ---- the queue (as on Linux, with LockFileEx locks for flock; ordered by the tickets' names) ----

namespace gpusel::detail {

struct Ticket::Impl {
  std::string dir, name;
  win::Handle file;
};

Ticket::Ticket(const LeaseStore& store, const TicketRequest& request) : impl_(new Impl) {
  impl_->dir = store.dir() + "\\queue";
  ::gpusel::check_folder(impl_->dir);
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  char name[64];
  std::snprintf(name, sizeof name, "%020lld-%lu", static_cast<long long>(now),
                static_cast<unsigned long>(GetCurrentProcessId()));
  impl_->name = name;
  std::string error;
  bool writable = false;
  impl_->file = win::open_lock_file(impl_->dir + "\\" + impl_->name, true, error, &writable);
  if (!impl_->file || !win::try_lock(impl_->file.get(), true)) {
    throw failure("cannot join the queue of waiting jobs in " + impl_->dir + ": " +
                  (error.empty() ? "cannot lock the ticket" : error));
  }
  const std::string text = format_ticket(request);
  OVERLAPPED at{};
  DWORD written = 0;
  WriteFile(impl_->file.get(), text.data(), static_cast<DWORD>(text.size()), &written, &at);
}

Ticket::~Ticket() {
  if (!impl_) return;
  impl_->file.reset();
  std::error_code ec;
  std::filesystem::remove(win::widen(impl_->dir + "\\" + impl_->name), ec);
}

void name_waiters(std::vector<Waiter>&) {}  // Windows tickets name no process

std::vector<Waiter> waiters(const LeaseStore& store, const Ticket* own) {
  std::vector<std::pair<std::string, Waiter>> found;
  const std::string dir = store.dir() + "\\queue";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(win::widen(dir), ec)) {
    const std::string name = win::narrow(e.path().filename().wstring());
    if (name.empty() || name[0] == '.') continue;
    const bool mine = own != nullptr && name == own->impl_->name;
    std::string text;
    std::string error;
    win::Handle h = win::open_lock_file(win::narrow(e.path().wstring()), false, error);
    if (!h) continue;
    if (!mine) {
      if (win::try_lock(h.get(), false)) {  // nobody holds it: a dead ticket
        win::unlock(h.get());
        h.reset();
        std::filesystem::remove(e.path(), ec);
        continue;
      }
    }
    char buf[65536];
    DWORD got = 0;
    OVERLAPPED at{};
    if (ReadFile(h.get(), buf, sizeof buf, &got, &at)) text.assign(buf, got);
    std::optional<TicketRequest> request = parse_ticket(text);
    if (!request) continue;
    Waiter w;
    w.request = std::move(*request);
    w.own = mine;
    found.emplace_back(name, std::move(w));
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Waiter> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

ReleaseWatch::ReleaseWatch(const LeaseStore&) {}

ReleaseWatch::~ReleaseWatch() = default;

void ReleaseWatch::follow(const std::string&) {}  // every wait() here is a short sleep

bool ReleaseWatch::wait(std::chrono::milliseconds timeout,
                        const std::vector<std::string>& /*gpus*/) {
  // No notification here: look again every 20 ms.
  Sleep(static_cast<DWORD>(std::clamp<long long>(timeout.count(), 0, 20)));
  return false;
}

std::string queue_directory(const LeaseStore& store) {
  return store.dir() + "\\queue";
}

std::vector<std::string> store_file_system_problems(const std::string&) {
  return {};  // the store's trust rests on its ACL (windows.md), not on modes or flock
}

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

// Windows leases carry their holder's pid in the file itself (written_pid): no job record.
void note_job_groups(const std::vector<int>&) {}

}  // namespace gpusel::detail
