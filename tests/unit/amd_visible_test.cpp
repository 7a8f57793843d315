// AMD's visibility variables (src/core/amd_visible.hpp) on the machine Debian's ROCm 5.2.3 was run
// on (docs/amd.md): KFD order B, C, A. Each expected answer is what ROCr and HIP 5.2.3 did there,
// or, for the newer HIP rules, what clr's source says.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "amd_visible.hpp"

namespace gpusel::detail {
namespace {

const std::map<std::string, std::string> kIds = {
    {"A", "GPU-1a2b3c4d5e6f7081"}, {"B", "GPU-2b3c4d5e6f708192"}, {"C", "GPU-3c4d5e6f708192a3"}};
const std::vector<std::string> kOrder = {"B", "C", "A"};  // KFD topology order

std::vector<std::string> ids(const std::vector<std::string>& letters) {
  std::vector<std::string> out;
  for (const std::string& l : letters) out.push_back(kIds.at(l));
  return out;
}

std::string letters(const std::vector<std::string>& base, const std::vector<std::size_t>& devices) {
  std::string out;
  for (std::size_t d : devices) {
    for (const auto& [letter, id] : kIds) {
      if (id == base[d]) out += (out.empty() ? "" : ",") + letter;
    }
  }
  return out.empty() ? "none" : out;
}

std::string rocr(const std::optional<std::string>& value) {
  const std::vector<std::string> base = ids(kOrder);
  const RocrVisible r = rocr_visible(base, value);
  return r.aborts ? "abort" : letters(base, r.devices);
}

TEST(AmdVisible, RocrAsRocm523ReadIt) {
  const std::vector<std::pair<std::optional<std::string>, std::string>> cases = {
      {std::nullopt, "B,C,A"},
      {"", "none"},
      {"0", "B"},
      {"2,0", "A,B"},
      {"1,1,2", "C"},
      {"0,-1,2", "B"},
      {"-1", "none"},
      {"3", "none"},
      {"2,1,0,5", "A,C,B"},
      {"GPU-3c4d5e6f708192a3", "C"},
      {"gpu-3C4D", "C"},
      {"GPU-", "none"},
      {"GPU-2", "B"},
      {"GPU-2,0", "B"},
      {"GPU-XX,1", "none"},
      {"GPU-1a2b3c4d5e6f70810", "none"},  // 21 characters
      {" 1 , 2 ", "C,A"},
      {"01", "C"},
      {"08", "none"},
      {"0x2", "A"},
      {"+1", "C"},
      {"1a", "none"},
      {"1 2", "none"},
      {"1,,2", "abort"},
      {"1,", "C"},
      {",1", "abort"},
      {"GPU-3c4d5e6f708192a3-ffff-0000", "none"},
      {"G1", "none"},
  };
  for (const auto& [value, want] : cases)
    EXPECT_EQ(rocr(value), want) << (value ? *value : "unset");
}

TEST(AmdVisible, RocrAmbiguousPrefixEndsTheList) {
  const std::vector<std::string> base = {"GPU-aa00000000000001", "GPU-aa00000000000002"};
  EXPECT_TRUE(rocr_visible(base, "GPU-aa0").devices.empty());
  EXPECT_EQ(rocr_visible(base, "GPU-aa00000000000002").devices, std::vector<std::size_t>{1});
}

std::string hip(const std::optional<std::string>& rocr_value, const std::optional<std::string>& h,
                const std::optional<std::string>& c, HipRules rules = hip_rules(5, 2)) {
  const std::vector<std::string> base = ids(kOrder);
  const RocrVisible r = rocr_visible(base, rocr_value);
  std::vector<std::string> kept;
  for (std::size_t d : r.devices) kept.push_back(base[d]);
  return letters(kept, hip_visible(kept, h, c, rules).devices);
}

TEST(AmdVisible, HipAsRocm523ReadIt) {
  const auto unset = std::nullopt;
  EXPECT_EQ(hip(unset, unset, unset), "B,C,A");
  EXPECT_EQ(hip(unset, "", unset), "B,C,A");  // ignored before the 2022 change
  EXPECT_EQ(hip(unset, unset, ""), "B,C,A");
  EXPECT_EQ(hip(unset, "1", "2"), "C");
  EXPECT_EQ(hip(unset, "", "2"), "A");
  EXPECT_EQ(hip(unset, "1,1,2", unset), "C,A");
  EXPECT_EQ(hip(unset, "0,-1,2", unset), "B");
  for (const char* bad : {"01", " 1", "+1", "3"}) EXPECT_EQ(hip(unset, bad, unset), "none") << bad;
  EXPECT_EQ(hip(unset, "1,,2", unset), "C");
  EXPECT_EQ(hip(unset, "GPU-3c4d5e6f708192a3", unset), "none");  // no ids before 6.2
  EXPECT_EQ(hip("2,1", "1", unset), "C");
  EXPECT_EQ(hip("2,1", "2", unset), "none");
  EXPECT_EQ(hip("1", unset, "1"), "none");  // Slurm's default: both variables
  EXPECT_EQ(hip("2,0", "1,0", unset), "B,A");
  EXPECT_EQ(hip("GPU-1a2b", "0", unset), "A");
  EXPECT_EQ(hip("", unset, unset), "none");
  EXPECT_EQ(hip(unset, "\"2,0\"", unset), "A,B");  // quotes removed
}

TEST(AmdVisible, NewerHipRules) {
  const HipRules now = hip_rules(6, 2);
  EXPECT_TRUE(now.empty_hides);
  EXPECT_TRUE(now.uuid_entries);
  EXPECT_FALSE(hip_rules(6, 1).uuid_entries);
  EXPECT_TRUE(hip_rules(5, 6).empty_hides);
  EXPECT_FALSE(hip_rules(5, 2).empty_hides);
  EXPECT_EQ(hip(std::nullopt, "", std::nullopt, now), "none");
  EXPECT_EQ(hip(std::nullopt, std::nullopt, "", now), "none");
  EXPECT_EQ(hip(std::nullopt, "", "2", now), "none");  // " " is non-empty: HIP's, invalid
  EXPECT_EQ(hip(std::nullopt, "GPU-3c4d5e6f708192a3", std::nullopt, now), "C");
  EXPECT_EQ(hip(std::nullopt, "GPU-3c4d,0", std::nullopt, now), "C,B");
  EXPECT_EQ(hip(std::nullopt, "GPU-3C4D", std::nullopt, now), "none");  // case-sensitive
}

std::vector<std::string> note_ids(const std::optional<std::string>& r,
                                  const std::optional<std::string>& h,
                                  const std::optional<std::string>& c) {
  std::vector<std::string> out;
  for (const AmdVisibilityNote& n : explain_amd_visibility(r, h, c)) out.push_back(n.id);
  return out;
}

TEST(AmdVisible, DoctorExplainsCompositions) {
  using V = std::vector<std::string>;
  EXPECT_EQ(note_ids(std::nullopt, std::nullopt, "1"),
            V{});  // CUDA_VISIBLE_DEVICES alone: NVIDIA's
  EXPECT_EQ(note_ids("1", std::nullopt, "1"), V{"amd-composition-hides-all"});
  EXPECT_EQ(note_ids("2,3", std::nullopt, "2,3"), V{"amd-composition-hides-all"});
  EXPECT_EQ(note_ids("0,1", std::nullopt, "0,1"), V{});  // positions 0 and 1 of ROCr's two
  EXPECT_EQ(note_ids("0,1", std::nullopt, "1,2"), V{"amd-hip-list-cut"});
  EXPECT_EQ(note_ids("1,,2", std::nullopt, std::nullopt), V{"amd-rocr-empty-entry"});
  EXPECT_EQ(note_ids("", std::nullopt, std::nullopt), V{"amd-rocr-hides-all"});
  EXPECT_EQ(note_ids("08", std::nullopt, std::nullopt), V{"amd-rocr-hides-all"});
  EXPECT_EQ(note_ids(std::nullopt, "", std::nullopt), V{"amd-hip-version-dependent"});
  EXPECT_EQ(note_ids(std::nullopt, "GPU-3c4d5e6f708192a3", std::nullopt),
            V{"amd-hip-version-dependent"});
  EXPECT_EQ(note_ids("GPU-1a2b", "0", std::nullopt), V{});
  const std::vector<AmdVisibilityNote> slurm = explain_amd_visibility("1", std::nullopt, "1");
  ASSERT_EQ(slurm.size(), 1u);
  EXPECT_NE(slurm[0].message.find("Slurm sets both"), std::string::npos) << slurm[0].message;
  EXPECT_NE(slurm[0].message.find("ROCr keeps 1 GPU, at position 0"), std::string::npos)
      << slurm[0].message;
}

}  // namespace
}  // namespace gpusel::detail
