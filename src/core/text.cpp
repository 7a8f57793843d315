// The core's text helpers: see text.hpp.
#include "text.hpp"

#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <limits>
#ifndef _WIN32
#include <locale.h>
#endif

namespace gpusel::detail {

namespace {

// A message's two wordings of one piece (reader_text): kOpen, the command line's, kSplit, the
// program's, kClose. Pieces do not nest. A value a message quotes (quote_value, printable) never
// holds these bytes; raw text that does (an environment value, a path) loses them when worded.
constexpr char kOpen = '\x1e';
constexpr char kSplit = '\x1f';
constexpr char kClose = '\x1d';

constexpr std::string_view kMarks = "\x1e\x1f\x1d";

constexpr bool is_mark(char c) noexcept {
  return kMarks.find(c) != std::string_view::npos;
}

// Appends `text` worded for `audience`: each well-formed piece (kOpen, no mark, kSplit, no mark,
// kClose) becomes the audience's wording; every other mark is left out. One pass, no recursion.
void append_worded(std::string& out, std::string_view text, Audience audience) {
  std::size_t at = 0;
  while (at < text.size()) {
    const char c = text[at];
    if (!is_mark(c)) {
      out += c;
      ++at;
      continue;
    }
    if (c == kOpen) {
      const std::size_t split = text.find_first_of(kMarks, at + 1);
      const std::size_t close =
          split == std::string_view::npos ? split : text.find_first_of(kMarks, split + 1);
      if (close != std::string_view::npos && text[split] == kSplit && text[close] == kClose) {
        out += audience == Audience::CommandLine ? text.substr(at + 1, split - at - 1)
                                                 : text.substr(split + 1, close - split - 1);
        at = close + 1;
        continue;
      }
    }
    ++at;  // a mark outside a well-formed piece
  }
}

}  // namespace

std::string reader_text(std::string_view command_line, std::string_view library) {
  std::string out;
  out.reserve(command_line.size() + library.size() + 3);
  out += kOpen;
  out += command_line;
  out += kSplit;
  out += library;
  out += kClose;
  return out;
}

std::string gpu_request_words() {
  return reader_text("--gpu", "GPU request");
}

std::string gpu_entry_words() {
  return reader_text("--gpu entry", "GPU entry");
}

std::string gpu_example(std::string_view value) {
  return reader_text("--gpu " + printable(value), quote_value(value));
}

std::string_view trim_blanks(std::string_view s) noexcept {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

std::string seconds_text(double seconds) {
  // Milliseconds as integers: no locale's decimal point, no "1.000000".
  if (!(seconds >= 0) || seconds > 1e15) return seconds < 0 ? "-" + seconds_text(-seconds) : "?";
  const auto ms = static_cast<unsigned long long>(seconds * 1000 + 0.5);
  std::string out = std::to_string(ms / 1000);
  unsigned frac = static_cast<unsigned>(ms % 1000);
  if (frac != 0) {
    std::string digits = std::to_string(1000 + frac).substr(1);  // "050" for 50 ms
    while (digits.back() == '0') digits.pop_back();
    out += "." + digits;
  }
  return out;
}

std::string general_number(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", value);
  // "%g" writes digits, a sign, an exponent ("e-07"), "inf" or "nan", and the locale's decimal
  // point (one byte or several, never a letter or digit), which becomes '.'.
  std::string out;
  bool in_point = false;
  for (const char* c = buf; *c != '\0'; ++c) {
    const bool plain = (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') ||
                       (*c >= 'A' && *c <= 'Z') || *c == '-' || *c == '+';
    if (plain) {
      out += *c;
    } else if (!in_point) {
      out += '.';
    }
    in_point = !plain;
  }
  return out;
}

bool all_digits(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::vector<std::string_view> split_commas(std::string_view value) {
  std::vector<std::string_view> out;
  each_comma_piece(value, [&](std::string_view piece) {
    out.push_back(piece);
    return true;
  });
  return out;
}

std::string_view strip_zeros(std::string_view digits) noexcept {
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  return digits;
}

std::optional<std::uint64_t> read_decimal(std::string_view digits, std::uint64_t max) noexcept {
  if (!all_digits(digits)) return std::nullopt;
  std::uint64_t value = 0;
  const char* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, value);
  if (ec != std::errc() || ptr != end || value > max) return std::nullopt;
  return value;
}

std::optional<double> read_plain_number(std::string_view text) noexcept {
  const std::optional<double> value = read_decimal_number(text, false);
  if (!value || *value > std::numeric_limits<double>::max()) return std::nullopt;
  return value;
}

namespace {

// The powers of ten a double holds exactly.
constexpr double kExactPowers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

// What the short way below cannot round exactly (more than 19 significant digits, a mantissa
// above 2^53, a power of ten past 1e22), read by the C library in the "C" locale.
std::optional<double> read_decimal_slowly(std::string_view text, long power) noexcept {
#ifdef _WIN32
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) {
    return power > 0 ? std::numeric_limits<double>::infinity() : 0.0;
  }
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
#else
  (void)power;
  try {
    const std::string copy(text);  // strtod reads up to a NUL
    static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(0));
    char* end = nullptr;
    const double value = c_locale != static_cast<locale_t>(0)
                             ? strtod_l(copy.c_str(), &end, c_locale)
                             : std::strtod(copy.c_str(), &end);
    if (end != copy.c_str() + copy.size()) return std::nullopt;
    return value;  // out of range: HUGE_VAL (infinity), or 0 or a denormal
  } catch (...) {
    return std::nullopt;
  }
#endif
}

}  // namespace

std::optional<double> read_decimal_number(std::string_view text, bool exponent) noexcept {
  // The first 19 significant digits as an integer, and the power of ten that scales it.
  std::uint64_t mantissa = 0;
  int kept = 0;
  long power = 0;
  bool dropped = false;  // a nonzero digit past the 19th
  bool capped = false;   // an exponent too long to add up (read by the C library)
  bool digit = false;
  std::size_t i = 0;
  const auto take = [&](char c, bool fraction) {
    digit = true;
    const unsigned d = static_cast<unsigned>(c - '0');
    if (mantissa == 0 && d == 0) {
      if (fraction) --power;
    } else if (kept < 19) {
      mantissa = mantissa * 10 + d;
      ++kept;
      if (fraction) --power;
    } else {
      dropped = dropped || d != 0;
      if (!fraction) ++power;
    }
  };
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) take(text[i], false);
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) take(text[i], true);
  }
  if (!digit) return std::nullopt;
  if (exponent && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    const bool negative = i < text.size() && text[i] == '-';
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
    const std::size_t start = i;
    long e = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      if (e < 1000000) {
        e = e * 10 + (text[i] - '0');  // past any double's range: the C library reads it
      } else {
        capped = true;
      }
    }
    if (i == start) return std::nullopt;
    power += negative ? -e : e;
  }
  if (i != text.size()) return std::nullopt;
  if (mantissa == 0) return 0.0;
  if (capped) return read_decimal_slowly(text, power);
  // Exact: both the mantissa and the power of ten are doubles without rounding, so the one
  // multiplication or division rounds once (in the default rounding mode, to nearest).
  if (!dropped && mantissa <= (std::uint64_t{1} << 53) && power >= -22 && power <= 22) {
    const double m = static_cast<double>(mantissa);
    return power >= 0 ? m * kExactPowers[power] : m / kExactPowers[-power];
  }
  return read_decimal_slowly(text, power);
}

bool is_plain_file_name(std::string_view name) noexcept {
  // One look-up a byte: every claim checks a UUID or two.
  static constexpr auto kPlain = [] {
    std::array<bool, 256> plain{};
    for (int c = 0; c < 256; ++c) {
      plain[static_cast<std::size_t>(c)] =
          (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    }
    return plain;
  }();
  if (name.empty() || name.size() > 96) return false;
  for (char c : name) {
    if (!kPlain[static_cast<unsigned char>(c)]) return false;
  }
  return true;
}

std::string quote_value(std::string_view value) {
  std::string out = "\"";
  for (unsigned char c : value) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string printable(std::string_view text) {
  // Plain ASCII, as almost every name and UUID is, in one copy (a character at a time cost a
  // bind's report 2,000 instructions).
  std::size_t plain = 0;
  while (plain < text.size() && static_cast<unsigned char>(text[plain]) >= 0x20 &&
         static_cast<unsigned char>(text[plain]) < 0x7f)
    ++plain;
  if (plain == text.size()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  out.append(text.substr(0, plain));
  text.remove_prefix(plain);
  auto escape = [&](unsigned char c) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) {
        escape(c);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence (no overlong form, surrogate or code point past U+10FFFF).
    const std::size_t len = c >= 0xc2 && c <= 0xdf   ? 2
                            : c >= 0xe0 && c <= 0xef ? 3
                            : c >= 0xf0 && c <= 0xf4 ? 4
                                                     : 0;
    bool ok = len != 0 && i + len <= text.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      ok = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
    }
    if (ok) {
      const auto c1 = static_cast<unsigned char>(text[i + 1]);
      ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0) && !(c == 0xf0 && c1 < 0x90) &&
           !(c == 0xf4 && c1 >= 0x90) && !(c == 0xc2 && c1 < 0xa0);  // C1 controls: U+0080-009F
    }
    if (!ok) {
      escape(c);
      ++i;
      continue;
    }
    out.append(text, i, len);
    i += len;
  }
  return out;
}

}  // namespace gpusel::detail

GPUSEL_BEGIN_NAMESPACE

std::string worded(std::string_view message, Audience audience) {
  if (message.find_first_of(detail::kMarks) == std::string_view::npos) return std::string(message);
  std::string out;
  out.reserve(message.size());
  detail::append_worded(out, message, audience);
  return out;
}

GPUSEL_END_NAMESPACE
