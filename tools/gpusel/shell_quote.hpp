// `gpusel sim env`'s quoting: a value as one POSIX shell word, safe for eval.
#pragma once

#include <string>
#include <string_view>

namespace gpusel::cli {

// `value` single-quoted, each ' written as '\''.
inline std::string shell_quote(std::string_view value) {
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

}  // namespace gpusel::cli
