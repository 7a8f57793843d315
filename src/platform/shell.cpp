// Shell words: a value written so that a POSIX shell (sh, bash, zsh, and `eval`) reads it back as
// exactly one word with exactly its bytes.
#include <string>
#include <string_view>

#include "gpusel_detail.hpp"

namespace gpusel::detail {

std::string shell_quote(std::string_view value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string shell_word(std::string_view value, std::string_view plain) {
  const auto is_plain = [plain](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           plain.find(c) != std::string_view::npos;
  };
  bool all_plain = !value.empty();
  for (char c : value) all_plain = all_plain && is_plain(c);
  return all_plain ? std::string(value) : shell_quote(value);
}

}  // namespace gpusel::detail
