// Parsing of --gpu values.
#include "gpusel/spec.hpp"

#include <algorithm>

#include "gpusel/error.hpp"
#include "gpusel/pick.hpp"
#include "gpusel/resolve.hpp"

namespace gpusel {
namespace {

constexpr std::string_view kUuidHead = "GPU-";

bool is_blank(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

char lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
}

std::string_view strip_zeros(std::string_view digits) noexcept {
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  return digits;
}

}  // namespace

bool equal_ci(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return lower(x) == lower(y); });
}

bool starts_with_ci(std::string_view text, std::string_view head) noexcept {
  return text.size() >= head.size() && equal_ci(text.substr(0, head.size()), head);
}

bool is_gpu_uuid(std::string_view entry) noexcept {
  return entry.size() >= kUuidHead.size() && equal_ci(entry.substr(0, kUuidHead.size()), kUuidHead);
}

bool is_gpu_index(std::string_view entry) noexcept {
  return !entry.empty() &&
         std::all_of(entry.begin(), entry.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string canonical_entry(std::string_view entry) {
  if (is_gpu_uuid(entry))
    return std::string(kUuidHead) + std::string(entry.substr(kUuidHead.size()));
  if (is_gpu_index(entry)) return std::string(entry);
  std::string hint;
  if (entry.size() >= 4 && equal_ci(entry.substr(0, 4), "MIG-")) {
    hint = "; MIG devices cannot be given to --gpu: gpusel places processes on whole GPUs";
  } else if (entry.find('-') != std::string_view::npos && is_gpu_index(entry.substr(0, 1))) {
    hint = "; ranges are not accepted, list each index (for example 0,1,2,3)";
  }
  throw bad_input("--gpu entry " + quote_value(entry) +
                  " is neither an nvidia-smi index (ASCII digits) nor a GPU UUID "
                  "(GPU-..., a unique prefix is enough)" +
                  hint + "; run `gpusel list` to see both for every GPU");
}

bool same_entry(std::string_view a, std::string_view b) noexcept {
  if (is_gpu_index(a) && is_gpu_index(b)) return strip_zeros(a) == strip_zeros(b);
  return equal_ci(a, b);
}

std::string join_entries(const std::vector<std::string>& entries) {
  std::string out;
  for (const auto& e : entries) {
    if (!out.empty()) out += ',';
    out += e;
  }
  return out;
}

std::vector<std::string> parse_gpu_spec(std::string_view value) {
  if (const std::optional<int> n = parse_free_request(value)) return {"free:" + std::to_string(*n)};
  std::vector<std::string> entries;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    std::string_view piece = trim(value.substr(start, comma - start));
    if (!piece.empty()) entries.push_back(canonical_entry(piece));
    start = comma + 1;
  }
  if (entries.empty()) {
    throw bad_input("--gpu " + quote_value(value) +
                    " names no GPU; give nvidia-smi indices or GPU UUIDs separated by commas "
                    "(run `gpusel list` to see them)");
  }
  const bool first_uuid = is_gpu_uuid(entries.front());
  for (const auto& e : entries) {
    if (is_gpu_uuid(e) != first_uuid) {
      throw bad_input("--gpu " + quote_value(value) + " mixes UUIDs (" +
                      quote_value(first_uuid ? entries.front() : e) + ") and indices (" +
                      quote_value(first_uuid ? e : entries.front()) +
                      "); use one kind for the whole list, as CUDA_VISIBLE_DEVICES requires");
    }
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (same_entry(entries[i], entries[j])) {
        throw bad_input("--gpu " + quote_value(value) + " names the same GPU twice (" +
                        quote_value(entries[j]) + " and " + quote_value(entries[i]) +
                        "); each rank needs a GPU of its own");
      }
    }
  }
  return entries;
}

std::string parse_single_gpu(std::string_view value) {
  auto entries = parse_gpu_spec(value);
  if (entries.size() != 1) {
    throw bad_input("--gpu " + quote_value(value) + " holds " + std::to_string(entries.size()) +
                    " GPUs, but this option takes exactly one; give a single index or UUID");
  }
  return entries.front();
}

}  // namespace gpusel
