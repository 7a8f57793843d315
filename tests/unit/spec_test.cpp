#include <gtest/gtest.h>

#include "gpusel/error.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"

using gpusel::parse_gpu_spec;
using gpusel::parse_single_gpu;
using Entries = std::vector<std::string>;

namespace {

// The message of the Error(BadInput) that `f` throws; fails the test if it throws nothing.
template <typename F>
std::string bad_input_message(F&& f) {
  try {
    f();
  } catch (const gpusel::Error& e) {
    EXPECT_EQ(e.kind(), gpusel::ErrorKind::BadInput);
    EXPECT_EQ(e.exit_code(), 2);
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

}  // namespace

TEST(Spec, IndicesAndBlanks) {
  EXPECT_EQ(parse_gpu_spec("0,1,2"), (Entries{"0", "1", "2"}));
  EXPECT_EQ(parse_gpu_spec(" 3 , ,\t1 ,"), (Entries{"3", "1"}));
  EXPECT_EQ(parse_gpu_spec("7"), (Entries{"7"}));
  EXPECT_EQ(parse_gpu_spec("007"), (Entries{"007"}));
}

TEST(Spec, UuidsAreCanonicalised) {
  EXPECT_EQ(parse_gpu_spec("gpu-8f3a"), (Entries{"GPU-8f3a"}));
  EXPECT_EQ(parse_gpu_spec("Gpu-ABcd, GPU-12"), (Entries{"GPU-ABcd", "GPU-12"}));
}

TEST(Spec, IsUuidIsIndex) {
  EXPECT_TRUE(gpusel::is_gpu_uuid("gPu-"));
  EXPECT_FALSE(gpusel::is_gpu_uuid("GPU"));
  EXPECT_FALSE(gpusel::is_gpu_uuid("MIG-GPU-1"));
  EXPECT_TRUE(gpusel::is_gpu_index("0123"));
  EXPECT_FALSE(gpusel::is_gpu_index(""));
  EXPECT_FALSE(gpusel::is_gpu_index("+1"));
  EXPECT_FALSE(gpusel::is_gpu_index("\xc2\xb2"));      // superscript two
  EXPECT_FALSE(gpusel::is_gpu_index("\xef\xbc\x91"));  // fullwidth one
}

TEST(Spec, RejectsWhatIsNeither) {
  struct Case {
    const char* value;
    const char* hint;
  };
  const Case cases[] = {
      {"abc", "neither"},
      {"-1", "neither"},
      {"1.5", "neither"},
      {"\xc2\xb2", "neither"},
      {"0-3", "ranges are not accepted"},
      {"MIG-5b2c", "MIG devices cannot be given"},
      {"0,cuda:1", "\"cuda:1\""},
  };
  for (const Case& c : cases) {
    std::string msg = bad_input_message([&] { parse_gpu_spec(c.value); });
    EXPECT_NE(msg.find(c.hint), std::string::npos) << c.value << ": " << msg;
    EXPECT_NE(msg.find("nvidia-smi -L"), std::string::npos) << msg;
  }
}

TEST(Spec, RejectsEmpty) {
  for (const char* value : {"", " ", ",", " , ,"}) {
    std::string msg = bad_input_message([&] { parse_gpu_spec(value); });
    EXPECT_NE(msg.find("names no GPU"), std::string::npos) << msg;
  }
}

TEST(Spec, RejectsMix) {
  std::string msg = bad_input_message([] { parse_gpu_spec("0,GPU-8f3a"); });
  EXPECT_NE(msg.find("mixes UUIDs (\"GPU-8f3a\") and indices (\"0\")"), std::string::npos) << msg;
  msg = bad_input_message([] { parse_gpu_spec("gpu-1,2"); });
  EXPECT_NE(msg.find("mixes"), std::string::npos) << msg;
}

TEST(Spec, RejectsTheSameGpuTwice) {
  for (const char* value : {"1,1", "1,01", "0,2,000", "GPU-ab,gpu-AB", "GPU-abc,GPU-ABC"}) {
    std::string msg = bad_input_message([&] { parse_gpu_spec(value); });
    EXPECT_NE(msg.find("same GPU twice"), std::string::npos) << value << ": " << msg;
  }
  // Different prefixes are not provably the same GPU here; resolution decides.
  EXPECT_EQ(parse_gpu_spec("GPU-ab,GPU-abc").size(), 2u);
  // The first repeat is named, with the entry it repeats, whether the list is compared entry by
  // entry (up to 64) or through a hash set (longer).
  for (int count : {8, 63, 64, 65, 300}) {
    std::string value;
    for (int i = 0; i < count; ++i) value += std::to_string(i) + ",";
    value += "07,3,07";
    std::string msg = bad_input_message([&] { parse_gpu_spec(value); });
    EXPECT_NE(msg.find("names the same GPU twice (\"7\" and \"07\")"), std::string::npos)
        << count << ": " << msg.substr(0, 80);
  }
}

TEST(Spec, SingleGpu) {
  EXPECT_EQ(parse_single_gpu(" 3 "), "3");
  EXPECT_EQ(parse_single_gpu("gpu-ab,"), "GPU-ab");
  std::string msg = bad_input_message([] { parse_single_gpu("0,1"); });
  EXPECT_NE(msg.find("holds 2 GPUs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("exactly one"), std::string::npos) << msg;
}

TEST(Spec, SameEntry) {
  EXPECT_TRUE(gpusel::detail::same_entry("1", "0001"));
  EXPECT_TRUE(gpusel::detail::same_entry("0", "00"));
  EXPECT_FALSE(gpusel::detail::same_entry("10", "1"));
  EXPECT_TRUE(gpusel::detail::same_entry("GPU-Ab", "GPU-aB"));
  EXPECT_FALSE(gpusel::detail::same_entry("GPU-ab", "GPU-abc"));
}

TEST(Spec, MessagesEscapeControlCharacters) {
  std::string msg = bad_input_message([] { parse_gpu_spec("x\x1b[31m"); });
  EXPECT_EQ(msg.find('\x1b'), std::string::npos);
  EXPECT_NE(msg.find("\\x1b"), std::string::npos) << msg;
}

// The duplicate check is not quadratic: 200,000 distinct entries (a quadratic check compares 2e10
// pairs, minutes) complete, and a repeat at the end is still found and named as before.
TEST(Spec, ManyDistinctEntries) {
  constexpr int kCount = 200000;
  std::string indices;
  std::string uuids;
  for (int i = 0; i < kCount; ++i) {
    indices += std::to_string(i) + ",";
    uuids += "GPU-" + std::to_string(i) + "-ab,";
  }
  EXPECT_EQ(parse_gpu_spec(indices).size(), static_cast<std::size_t>(kCount));
  EXPECT_EQ(parse_gpu_spec(uuids).size(), static_cast<std::size_t>(kCount));
  std::string msg = bad_input_message([&] { parse_gpu_spec(indices + "00199999"); });
  EXPECT_NE(msg.find("names the same GPU twice (\"199999\" and \"00199999\")"), std::string::npos)
      << msg.substr(msg.size() - 200);
  msg = bad_input_message([&] { parse_gpu_spec(uuids + "gpu-7-AB"); });
  EXPECT_NE(msg.find("names the same GPU twice (\"GPU-7-ab\" and \"GPU-7-AB\")"), std::string::npos)
      << msg.substr(msg.size() - 200);
}

// "all" alone is a request (resolve_gpus expands it); a worker's list names GPUs and refuses it.
TEST(Spec, AllIsARequestNotAnAssignment) {
  EXPECT_EQ(gpusel::parse_gpu_request("all"), Entries{"all"});
  EXPECT_EQ(gpusel::parse_gpu_request(" ALL "), Entries{"all"});
  EXPECT_EQ(gpusel::parse_gpu_request("free:2"), Entries{"free:2"});
  EXPECT_EQ(gpusel::parse_gpu_request("3,1"), (Entries{"3", "1"}));
  EXPECT_THROW(gpusel::parse_gpu_request("all,0"), gpusel::Error);
  EXPECT_THROW(parse_gpu_spec("all"), gpusel::Error);
  EXPECT_THROW(parse_single_gpu("all"), gpusel::Error);
  EXPECT_TRUE(gpusel::detail::is_all_entry("All"));
  EXPECT_FALSE(gpusel::detail::is_all_entry("alll"));
}

// A request is read once into typed values: the kind of each entry and an index's value, which
// everything downstream uses instead of reading the text again.
TEST(Spec, ARequestIsReadOnceIntoTypedValues) {
  using gpusel::GpuEntry;
  using gpusel::GpuRequest;
  using gpusel::read_gpu_request;
  const GpuRequest indices = read_gpu_request(" 007, 1 ,18446744073709551616");
  ASSERT_EQ(indices.kind, GpuRequest::Kind::Gpus);
  ASSERT_EQ(indices.gpus.size(), 3u);
  EXPECT_EQ(indices.gpus[0].kind, GpuEntry::Kind::Index);
  EXPECT_EQ(indices.gpus[0].index, 7u);
  EXPECT_EQ(indices.gpus[0].text, "007");
  EXPECT_EQ(indices.gpus[1].index, 1u);
  EXPECT_EQ(indices.gpus[2].index, UINT64_MAX);  // past 64 bits: out of any machine's range
  EXPECT_EQ(indices.texts(), (Entries{"007", "1", "18446744073709551616"}));

  const GpuRequest uuids = read_gpu_request("gpu-ab12,GPU-CD");
  ASSERT_EQ(uuids.gpus.size(), 2u);
  EXPECT_TRUE(uuids.gpus[0].is_uuid());
  EXPECT_EQ(uuids.gpus[0].text, "GPU-ab12");
  EXPECT_EQ(uuids.gpus[0].index, 0u);

  const GpuRequest free = read_gpu_request(" FREE:3 ");
  EXPECT_EQ(free.kind, GpuRequest::Kind::Free);
  EXPECT_EQ(free.free_count, 3);
  EXPECT_TRUE(free.gpus.empty());
  EXPECT_EQ(free.texts(), (Entries{"free:3"}));

  const GpuRequest all = read_gpu_request(" All ");
  EXPECT_EQ(all.kind, GpuRequest::Kind::All);
  EXPECT_EQ(all.texts(), (Entries{"all"}));
  // A worker's own list names GPUs: all is refused there, as parse_gpu_spec refuses it.
  EXPECT_NE(bad_input_message([] { read_gpu_request("all", false); }).find("stands alone"),
            std::string::npos);
}

TEST(Spec, TypedAndTextReadingsAgree) {
  // parse_gpu_spec and parse_gpu_request are the typed reading's texts, refusals included.
  for (const char* value : {"0,1", " 3 , ,1", "gpu-1,GPU-2", "free:2", "all", "0,GPU-1", "1,01", "",
                            "cuda:0", "0-3", "free:0", "CUDA_VISIBLE_DEVICES=1"}) {
    std::string typed, text;
    Entries typed_out, text_out;
    try {
      typed_out = gpusel::read_gpu_request(value).texts();
    } catch (const gpusel::Error& e) {
      typed = e.what();
    }
    try {
      text_out = gpusel::parse_gpu_request(value);
    } catch (const gpusel::Error& e) {
      text = e.what();
    }
    EXPECT_EQ(typed, text) << value;
    EXPECT_EQ(typed_out, text_out) << value;
  }
  EXPECT_EQ(gpusel::read_single_gpu("04").gpus.at(0).index, 4u);
  EXPECT_NE(bad_input_message([] { gpusel::read_single_gpu("1,2"); }).find("exactly one"),
            std::string::npos);
}
