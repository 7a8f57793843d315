// Leases on Windows: not available yet. gpusel's leases are flock(2) locks on files in a shared
// folder (lease.cpp); Windows has no equivalent that the other platforms' jobs would honour, so
// taking a lease (--lease, free:N with --wait) is refused with a message, and no GPU is ever
// shown as leased. Process details come from the process itself where Windows lets us open it.
#include "../platform/win.hpp"
#include "gpusel/error.hpp"
#include "gpusel/lease.hpp"

GPUSEL_BEGIN_NAMESPACE

namespace {

constexpr const char* kNoLeases =
    "GPU leases are not supported on Windows yet (they are file locks that only Linux's flock "
    "provides here); run without --lease, or on Linux";

}  // namespace

LeaseHolder process_details(int pid) {
  namespace win = detail::win;
  LeaseHolder h;
  h.pid = pid;
  win::Handle process(OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, static_cast<DWORD>(pid)));
  if (!process) return h;
  wchar_t name[MAX_PATH * 4];
  DWORD size = sizeof name / sizeof name[0];
  if (QueryFullProcessImageNameW(process.get(), 0, name, &size)) h.command = win::narrow(std::wstring(name, size));
  FILETIME created{}, exited{}, kernel{}, user{};
  SYSTEMTIME utc{}, local{};
  if (GetProcessTimes(process.get(), &created, &exited, &kernel, &user) &&
      FileTimeToSystemTime(&created, &utc) && SystemTimeToTzSpecificLocalTime(nullptr, &utc, &local)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04u-%02u-%02u %02u:%02u:%02u", local.wYear, local.wMonth, local.wDay,
                  local.wHour, local.wMinute, local.wSecond);
    h.started = buf;
  }
  return h;
}

std::string lease_directory() {
  const char* dir = std::getenv("GPUSEL_LEASE_DIR");
  if (dir != nullptr && *dir != '\0') return dir;
  return "";
}

void check_lease_directory(const std::string&) { throw failure(kNoLeases); }

std::string describe_holder(const LeaseHolder& holder) {
  std::string out = "pid " + std::to_string(holder.pid);
  std::string details;
  if (!holder.user.empty()) details += "user " + holder.user;
  if (!holder.command.empty()) {
    details += (details.empty() ? "" : ", ") + std::string("command `") + holder.command + "`";
  }
  if (!holder.started.empty()) {
    details += (details.empty() ? "" : ", ") + std::string("since ") + holder.started;
  }
  return details.empty() ? out : out + " (" + details + ")";
}

Lease& Lease::operator=(Lease&& other) noexcept {
  fd_ = other.fd_;
  uuid_ = std::move(other.uuid_);
  other.fd_ = -1;
  return *this;
}

Lease::~Lease() = default;

std::optional<Lease> try_lease(const std::string&, const std::string&, std::optional<LeaseHolder>*) {
  throw failure(kNoLeases);
}

std::optional<LeaseHolder> lease_holder(const std::string&, const std::string&) { return std::nullopt; }

GPUSEL_END_NAMESPACE
