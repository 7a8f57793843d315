// The C ABI's contract: statuses, the thread-local last error, caller buffers and size queries.
#include <gtest/gtest.h>

#ifndef _WIN32
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gpusel/gpusel.h"
#include "gpusel/version.h"
#include "sized_struct.hpp"

TEST(CApi, ParseIntoCallerBuffer) {
  char buf[64];
  size_t needed = 0;
  ASSERT_EQ(gpusel_parse_gpu_spec(" 3, gpu-ab ,", buf, sizeof buf, &needed), GPUSEL_BAD_INPUT);
  EXPECT_NE(std::string(gpusel_last_error()).find("mixes"), std::string::npos);
  ASSERT_EQ(gpusel_parse_gpu_spec(" 1, ,01", buf, sizeof buf, &needed), GPUSEL_BAD_INPUT);
  EXPECT_NE(std::string(gpusel_last_error()).find("same GPU twice"), std::string::npos);
  ASSERT_EQ(gpusel_parse_gpu_spec(" 3, ,1", buf, sizeof buf, &needed), GPUSEL_OK);
  EXPECT_STREQ(buf, "3,1");
  EXPECT_EQ(needed, 4u);
  EXPECT_STREQ(gpusel_last_error(), "");  // a successful call clears it
}

TEST(CApi, TooSmallThenRetry) {
  char small[4] = {'x', 'x', 'x', 'x'};
  size_t needed = 0;
  ASSERT_EQ(gpusel_parse_gpu_spec("GPU-abcdef", small, sizeof small, &needed), GPUSEL_TOO_SMALL);
  EXPECT_EQ(needed, 11u);
  EXPECT_EQ(small[0], 'x');  // nothing written
  std::string big(needed, '\0');
  ASSERT_EQ(gpusel_parse_gpu_spec("GPU-abcdef", big.data(), big.size(), nullptr), GPUSEL_OK);
  EXPECT_STREQ(big.c_str(), "GPU-abcdef");
  ASSERT_EQ(gpusel_parse_gpu_spec("1", nullptr, 0, &needed), GPUSEL_TOO_SMALL);
  EXPECT_EQ(needed, 2u);
}

TEST(CApi, SingleAndPredicates) {
  char buf[16];
  EXPECT_EQ(gpusel_parse_single_gpu("0,1", buf, sizeof buf, nullptr), GPUSEL_BAD_INPUT);
  EXPECT_NE(std::string(gpusel_last_error()).find("exactly one"), std::string::npos);
  EXPECT_EQ(gpusel_parse_single_gpu(" 7 ", buf, sizeof buf, nullptr), GPUSEL_OK);
  EXPECT_STREQ(buf, "7");
  EXPECT_EQ(gpusel_is_gpu_uuid("gpu-1"), 1);
  EXPECT_EQ(gpusel_is_gpu_uuid(nullptr), 0);
  EXPECT_EQ(gpusel_is_gpu_index("12"), 1);
  EXPECT_EQ(gpusel_is_gpu_index("1a"), 0);
}

TEST(CApi, NullArgumentsAreBadInputNotCrashes) {
  char buf[16];
  EXPECT_EQ(gpusel_parse_gpu_spec(nullptr, buf, sizeof buf, nullptr), GPUSEL_BAD_INPUT);
  EXPECT_NE(std::string(gpusel_last_error()).find("NULL"), std::string::npos);
  EXPECT_EQ(gpusel_set_assigned_gpu(nullptr), GPUSEL_BAD_INPUT);
  EXPECT_EQ(gpusel_list_gpus(nullptr), GPUSEL_BAD_INPUT);
  EXPECT_EQ(gpusel_gpu_list_get(nullptr, 0, nullptr), GPUSEL_BAD_INPUT);
  EXPECT_EQ(gpusel_gpu_list_count(nullptr), 0u);
  gpusel_gpu_list_free(nullptr);
  EXPECT_EQ(gpusel_gpu_identity(0, nullptr), GPUSEL_BAD_INPUT);
}

TEST(CApi, StructSizeBelowTheFirstVersionIsBadInput) {
  // Refused before CUDA is touched: the caller did not set `size`.
  gpusel_identity id{};
  EXPECT_EQ(gpusel_gpu_identity(0, &id), GPUSEL_BAD_INPUT);
  EXPECT_NE(std::string(gpusel_last_error()).find("gpusel_identity->size is 0"), std::string::npos);
  id.size = offsetof(gpusel_identity, pci_bus_id);  // an impossible older version: too short
  EXPECT_EQ(gpusel_gpu_identity(0, &id), GPUSEL_BAD_INPUT);
  EXPECT_NE(std::string(gpusel_last_error()).find("sizeof(gpusel_identity)"), std::string::npos);
  // `size` leads each struct, so any version of a caller can set it.
  EXPECT_EQ(offsetof(gpusel_identity, size), 0u);
  EXPECT_EQ(offsetof(gpusel_gpu_info, size), 0u);
}

TEST(CApi, LastErrorIsPerThread) {
  char buf[16];
  ASSERT_EQ(gpusel_parse_gpu_spec("bogus", buf, sizeof buf, nullptr), GPUSEL_BAD_INPUT);
  std::string other;
  std::thread([&] {
    other = gpusel_last_error();
    gpusel_parse_gpu_spec("also,bad,x", buf, sizeof buf, nullptr);
  }).join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(gpusel_last_error()).find("\"bogus\""), std::string::npos);
}

TEST(CApi, Version) {
  EXPECT_STREQ(gpusel_version(), GPUSEL_VERSION_STRING);
  EXPECT_EQ(std::string(GPUSEL_VERSION_STRING), std::to_string(GPUSEL_VERSION_MAJOR) + "." +
                                                    std::to_string(GPUSEL_VERSION_MINOR) + "." +
                                                    std::to_string(GPUSEL_VERSION_PATCH));
}

namespace {

// Three versions of one caller-sized struct, to try the rule of sized_struct.hpp with callers
// older and newer than "the library" (V2 here).
struct V1 {
  std::size_t size;
  int a;
  char text[12];
};
struct V2 {
  std::size_t size;
  int a;
  char text[12];
  unsigned long long b;
  int c;
};
struct V3 {
  std::size_t size;
  int a;
  char text[12];
  unsigned long long b;
  int c;
  int d;
  char more[40];
};

// Where V2's fields end: its sizeof adds padding, where V3 puts `d`.
constexpr std::size_t kV2FieldsEnd = offsetof(V2, c) + sizeof(int);
static_assert(sizeof(V2) > kV2FieldsEnd && offsetof(V3, d) == kV2FieldsEnd);

V2 library_value() {
  V2 v{};
  v.size = sizeof v;
  v.a = 7;
  std::memcpy(v.text, "eleven char", 12);
  v.b = 0x1122334455667788ull;
  v.c = -5;
  return v;
}

}  // namespace

TEST(SizedStruct, AnOlderCallersStructIsFilledOnlyAsFarAsItGoes) {
  // V1 at the start of a buffer whose remaining bytes must stay as they are.
  std::vector<unsigned char> buf(sizeof(V2) + 32, 0xab);
  V1 old{};
  old.size = sizeof old;
  std::memcpy(buf.data(), &old, sizeof old.size);
  const V2 value = library_value();
  EXPECT_EQ(gpusel::detail::copy_sized_struct(buf.data(), &value, kV2FieldsEnd), sizeof(V1));
  std::memcpy(&old, buf.data(), sizeof old);
  EXPECT_EQ(old.size, sizeof(V1));
  EXPECT_EQ(old.a, 7);
  EXPECT_STREQ(old.text, "eleven char");
  for (std::size_t i = sizeof(V1); i < buf.size(); ++i) ASSERT_EQ(buf[i], 0xab) << "byte " << i;
}

TEST(SizedStruct, ANewerCallersOwnFieldsKeepTheirValues) {
  V3 newer{};
  newer.size = sizeof newer;
  newer.d = 42;
  std::memset(newer.more, 'm', sizeof newer.more);
  const V2 value = library_value();
  EXPECT_EQ(gpusel::detail::copy_sized_struct(&newer, &value, kV2FieldsEnd), kV2FieldsEnd);
  EXPECT_EQ(newer.size, sizeof(V3));  // never written
  EXPECT_EQ(newer.a, 7);
  EXPECT_EQ(newer.b, 0x1122334455667788ull);
  EXPECT_EQ(newer.c, -5);
  EXPECT_EQ(newer.d, 42);
  for (char ch : newer.more) ASSERT_EQ(ch, 'm');
}

TEST(SizedStruct, NoSizeMakesTheLibraryWritePastItsOwnStruct) {
  const V2 value = library_value();
  for (std::size_t claimed :
       {std::size_t{0}, std::size_t{3}, sizeof(std::size_t), sizeof(std::size_t) + 1,
        kV2FieldsEnd - 1, kV2FieldsEnd, sizeof(V2), sizeof(V2) + 1, std::size_t{100000},
        std::size_t{0xffffffffffffull}, SIZE_MAX}) {
    std::vector<unsigned char> buf(sizeof(V2) + 64, 0xcd);
    std::memcpy(buf.data(), &claimed, sizeof claimed);
    const std::size_t valid = gpusel::detail::copy_sized_struct(buf.data(), &value, kV2FieldsEnd);
    EXPECT_EQ(valid, std::min(claimed, kV2FieldsEnd)) << claimed;
    EXPECT_EQ(gpusel::detail::caller_struct_size(buf.data()), claimed);
    // Written: the library's bytes up to `valid`; beyond it nothing.
    for (std::size_t i = sizeof(std::size_t); i < valid; ++i)
      ASSERT_EQ(buf[i], reinterpret_cast<const unsigned char*>(&value)[i]) << claimed << " " << i;
    for (std::size_t i = std::max(valid, sizeof(std::size_t)); i < buf.size(); ++i)
      ASSERT_EQ(buf[i], 0xcd) << claimed << " byte " << i;
  }
}

#ifndef _WIN32  // fork; tests/windows covers the DLL's C API
namespace {

// Runs `body` in a child on the simulated dgx-h100 (the driver libraries are loaded once per
// process, so the other tests keep theirs); returns the child's exit status, 0 when every check
// in it held. The child names the first check that failed on stderr.
template <typename F>
int on_simulated_machine(F body) {
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe");
  const std::filesystem::path sim = exe.parent_path().parent_path() / "lib" / "gpusel" / "sim";
  if (!std::filesystem::exists(sim / "libcuda.so.1")) return 77;
  const pid_t pid = ::fork();
  if (pid < 0) return 99;
  if (pid == 0) {
    for (const char* name : {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "GPUSEL_GPUS",
                             "GPUSEL_GPU", "LOCAL_RANK", "SLURM_LOCALID"})
      ::unsetenv(name);
    ::setenv("GPUSEL_SIM_MACHINE",
             (std::string(GPUSEL_SOURCE_DIR) + "/sim/machines/dgx-h100.toml").c_str(), 1);
    ::setenv("GPUSEL_CUDA_LIBRARY", (sim / "libcuda.so.1").c_str(), 1);
    ::setenv("GPUSEL_NVML_LIBRARY", (sim / "libnvidia-ml.so.1").c_str(), 1);
    ::_exit(body());
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return 98;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define CHILD_CHECK(cond, code)                                                    \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "check failed: %s (%s)\n", #cond, gpusel_last_error()); \
      return code;                                                                 \
    }                                                                              \
  } while (0)

// The caller's struct (whose fields, in this library's version, end at `fields_end`) claiming
// sizes from the right one to absurd ones: as a heap block of exactly sizeof(T) (AddressSanitizer
// reports any write past it), and inside a larger buffer whose tail must stay untouched. Sizes
// below the first version's (here: this version's) are refused without a write.
template <typename T>
int check_sizes(int (*call)(T*), std::size_t fields_end) {
  T reference{};
  reference.size = sizeof reference;
  CHILD_CHECK(call(&reference) == GPUSEL_OK, 10);
  for (std::size_t claimed : {sizeof(T), sizeof(T) + 1, sizeof(T) + 16, std::size_t{100000},
                              std::size_t{0xffffffffffffull}, SIZE_MAX}) {
    // Exactly the library's struct, claiming more.
    auto* exact = static_cast<unsigned char*>(std::malloc(sizeof(T)));
    CHILD_CHECK(exact != nullptr, 11);
    std::memset(exact, 0x5a, sizeof(T));
    std::memcpy(exact, &claimed, sizeof claimed);
    CHILD_CHECK(call(reinterpret_cast<T*>(exact)) == GPUSEL_OK, 12);
    CHILD_CHECK(std::memcmp(exact + sizeof claimed,
                            reinterpret_cast<const unsigned char*>(&reference) + sizeof claimed,
                            fields_end - sizeof claimed) == 0,
                13);
    for (std::size_t i = fields_end; i < sizeof(T); ++i) CHILD_CHECK(exact[i] == 0x5a, 19);
    CHILD_CHECK(gpusel::detail::caller_struct_size(exact) == claimed, 14);
    std::free(exact);
    // A larger buffer: the bytes after the library's struct keep the caller's values.
    std::vector<unsigned char> big(sizeof(T) + 256, 0x5a);
    std::memcpy(big.data(), &claimed, sizeof claimed);
    CHILD_CHECK(call(reinterpret_cast<T*>(big.data())) == GPUSEL_OK, 15);
    for (std::size_t i = fields_end; i < big.size(); ++i) CHILD_CHECK(big[i] == 0x5a, 16);
  }
  // Below the first version: refused, nothing written.
  for (std::size_t claimed : {std::size_t{0}, std::size_t{8}, fields_end - 1}) {
    std::vector<unsigned char> buf(sizeof(T), 0x5a);
    std::memcpy(buf.data(), &claimed, sizeof claimed);
    CHILD_CHECK(call(reinterpret_cast<T*>(buf.data())) == GPUSEL_BAD_INPUT, 17);
    for (std::size_t i = sizeof claimed; i < buf.size(); ++i) CHILD_CHECK(buf[i] == 0x5a, 18);
  }
  return 0;
}

}  // namespace

TEST(CApi, IdentityWritesNoFurtherThanItsOwnStructWhateverSizeSays) {
  const int status = on_simulated_machine([] {
    return check_sizes<gpusel_identity>(
        [](gpusel_identity* id) { return gpusel_gpu_identity(3, id); },
        offsetof(gpusel_identity, pci_bus_id) + sizeof(gpusel_identity::pci_bus_id));
  });
  if (status == 77) GTEST_SKIP() << "no simulator beside the test";
  EXPECT_EQ(status, 0) << "see the child's message above";
}

TEST(CApi, GpuListEntryWritesNoFurtherThanItsOwnStructWhateverSizeSays) {
  const int status = on_simulated_machine([] {
    gpusel_gpu_list* list = nullptr;
    CHILD_CHECK(gpusel_list_gpus(&list) == GPUSEL_OK, 20);
    CHILD_CHECK(gpusel_gpu_list_count(list) == 8, 21);
    static gpusel_gpu_list* the_list = list;
    const int rc = check_sizes<gpusel_gpu_info>(
        [](gpusel_gpu_info* info) { return gpusel_gpu_list_get(the_list, 5, info); },
        offsetof(gpusel_gpu_info, mig_enabled) + sizeof(gpusel_gpu_info::mig_enabled));
    gpusel_gpu_list_free(list);
    return rc;
  });
  if (status == 77) GTEST_SKIP() << "no simulator beside the test";
  EXPECT_EQ(status, 0) << "see the child's message above";
}
TEST(CApi, GpuFieldsByName) {
  const int status = on_simulated_machine([] {
    gpusel_gpu_list* list = nullptr;
    CHILD_CHECK(gpusel_list_gpus_with(GPUSEL_LIST_USAGE, &list) == GPUSEL_OK, 20);
    char buf[64];
    size_t needed = 0;
    int present = -1;
    CHILD_CHECK(gpusel_gpu_list_field(list, 5, "nvidia_smi_index", buf, sizeof buf, &needed,
                                      &present) == GPUSEL_OK,
                21);
    CHILD_CHECK(std::string(buf) == "5" && present == 1 && needed == 2, 22);
    CHILD_CHECK(gpusel_gpu_list_field(list, 5, "memory_used_bytes", buf, sizeof buf, &needed,
                                      &present) == GPUSEL_OK &&
                    present == 1,
                23);
    char small[4];
    CHILD_CHECK(gpusel_gpu_list_field(list, 5, "uuid", small, sizeof small, &needed, &present) ==
                        GPUSEL_TOO_SMALL &&
                    needed == 41 && present == 0,
                24);
    CHILD_CHECK(gpusel_gpu_list_field(list, 5, "total_bytes", buf, sizeof buf, &needed, &present) ==
                    GPUSEL_BAD_INPUT,
                25);
    CHILD_CHECK(std::string(gpusel_last_error()).find("memory_total_bytes") != std::string::npos,
                26);
    CHILD_CHECK(gpusel_gpu_list_field(list, 8, "uuid", buf, sizeof buf, &needed, &present) ==
                    GPUSEL_BAD_INPUT,
                27);
    gpusel_gpu_list_free(list);
    // Without usage, the fields read with it are absent.
    CHILD_CHECK(gpusel_list_gpus(&list) == GPUSEL_OK, 28);
    CHILD_CHECK(gpusel_gpu_list_field(list, 5, "memory_used_bytes", buf, sizeof buf, &needed,
                                      &present) == GPUSEL_OK &&
                    present == 0 && buf[0] == '\0',
                29);
    gpusel_gpu_list_free(list);
    CHILD_CHECK(gpusel_list_gpus_with(2, &list) == GPUSEL_BAD_INPUT && list == nullptr, 30);
    return 0;
  });
  if (status == 77) GTEST_SKIP() << "no simulator beside the test";
  EXPECT_EQ(status, 0) << "see the child's message above";
}

#endif

TEST(CApi, GpuFieldNamesEndWithNull) {
  size_t k = 0;
  while (gpusel_gpu_field_name(k) != nullptr) {
    EXPECT_GE(gpusel_gpu_field_kind(k), GPUSEL_FIELD_TEXT);
    EXPECT_LE(gpusel_gpu_field_kind(k), GPUSEL_FIELD_FLAG);
    ++k;
  }
  EXPECT_GT(k, 10u);
  EXPECT_EQ(gpusel_gpu_field_kind(k), -1);
  EXPECT_STREQ(gpusel_gpu_field_name(0), "nvidia_smi_index");
}

// Failures as data: the code, and the driver call with its return value, whatever the message says.
TEST(CApi, FailuresCarryACode) {
  char buf[8];
  size_t needed = 0;
  ASSERT_EQ(gpusel_parse_gpu_spec("3,GPU-ab", buf, sizeof buf, &needed), GPUSEL_BAD_INPUT);
  EXPECT_EQ(gpusel_last_error_code(), GPUSEL_ERROR_BAD_INPUT);
  long long result = -1;
  EXPECT_STREQ(gpusel_last_error_call(&result), "");
  EXPECT_EQ(result, 0);
  ASSERT_EQ(gpusel_parse_gpu_spec("GPU-abcdef", buf, 2, &needed), GPUSEL_TOO_SMALL);
  EXPECT_EQ(gpusel_last_error_code(), GPUSEL_ERROR_BUFFER_TOO_SMALL);
  ASSERT_EQ(gpusel_parse_gpu_spec("1", buf, sizeof buf, &needed), GPUSEL_OK);
  EXPECT_EQ(gpusel_last_error_code(), GPUSEL_ERROR_NONE);  // a successful call clears it
  EXPECT_STREQ(gpusel_last_error_call(nullptr), "");
}

TEST(CApi, FailuresSayWhatTheyAreAboutAndTheirValues) {
  char buf[256];
  size_t needed = 0;
  // A refused request: its subject, and its fields by name and in order.
  ASSERT_EQ(gpusel_parse_gpu_spec("3,GPU-ab", buf, sizeof buf, &needed), GPUSEL_BAD_INPUT);
  EXPECT_STREQ(gpusel_last_error_subject(), "gpu-request");
  ASSERT_NE(gpusel_last_error_field("request"), nullptr);
  EXPECT_STREQ(gpusel_last_error_field("request"), "3,GPU-ab");
  EXPECT_STREQ(gpusel_last_error_field("reason"), "mixed-kinds");
  EXPECT_EQ(gpusel_last_error_field("entry"), nullptr);
  EXPECT_EQ(gpusel_last_error_field(nullptr), nullptr);
  EXPECT_STREQ(gpusel_last_error_field_name(0), "request");
  EXPECT_STREQ(gpusel_last_error_field_name(1), "reason");
  EXPECT_EQ(gpusel_last_error_field_name(2), nullptr);
  // One entry that cannot be read: about that entry, as given.
  ASSERT_EQ(gpusel_parse_gpu_spec("0,x7", buf, sizeof buf, &needed), GPUSEL_BAD_INPUT);
  EXPECT_STREQ(gpusel_last_error_subject(), "gpu-entry");
  EXPECT_STREQ(gpusel_last_error_field("entry"), "x7");
  EXPECT_STREQ(gpusel_last_error_field("reason"), "unreadable");
  // A success clears them; so does a failure about nothing in particular.
  ASSERT_EQ(gpusel_parse_gpu_spec("1", buf, sizeof buf, &needed), GPUSEL_OK);
  EXPECT_STREQ(gpusel_last_error_subject(), "");
  EXPECT_EQ(gpusel_last_error_field_name(0), nullptr);
  ASSERT_EQ(gpusel_parse_gpu_spec("GPU-abcdef", buf, 2, &needed), GPUSEL_TOO_SMALL);
  EXPECT_STREQ(gpusel_last_error_subject(), "");
  EXPECT_EQ(gpusel_last_error_field("request"), nullptr);
}

#ifndef _WIN32
TEST(CApi, DriverFailuresNameTheCallAndItsResult) {
  // No NVML at all: the library could not be loaded, no call failed.
  int status = on_simulated_machine([] {
    ::setenv("GPUSEL_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    gpusel_gpu_list* list = nullptr;
    CHILD_CHECK(gpusel_list_gpus(&list) == GPUSEL_FAILURE, 30);
    CHILD_CHECK(gpusel_last_error_code() == GPUSEL_ERROR_LIBRARY_NOT_LOADED, 31);
    long long result = -1;
    CHILD_CHECK(std::string(gpusel_last_error_call(&result)).empty() && result == 0, 32);
    return 0;
  });
  if (status == 77) GTEST_SKIP() << "no simulator beside the test";
  EXPECT_EQ(status, 0) << "see the child's message above";
  // CUDA_VISIBLE_DEVICES hides every GPU: cuInit answers CUDA_ERROR_NO_DEVICE (100).
  status = on_simulated_machine([] {
    ::setenv("CUDA_VISIBLE_DEVICES", "-1", 1);
    gpusel_identity id{};
    id.size = sizeof id;
    CHILD_CHECK(gpusel_gpu_identity(0, &id) == GPUSEL_FAILURE, 40);
    CHILD_CHECK(gpusel_last_error_code() == GPUSEL_ERROR_NO_DEVICE, 41);
    long long result = -1;
    CHILD_CHECK(std::string(gpusel_last_error_call(&result)) == "cuInit", 42);
    CHILD_CHECK(result == 100, 43);
    return 0;
  });
  EXPECT_EQ(status, 0) << "see the child's message above";
}
#endif
