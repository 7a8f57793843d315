#include "gpusel_detail.hpp"

#include <cmath>
#include <cstdio>
#include <limits>

#include "text.hpp"

namespace gpusel::detail {

detail::ByteSize read_byte_size(std::string_view text) {
  detail::ByteSize out;
  std::size_t i = 0;
  while (i < text.size() && text[i] == ' ') ++i;
  const std::size_t start = i;
  bool dot = false;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || (text[i] == '.' && !dot))) {
    dot = dot || text[i] == '.';
    ++i;
  }
  if (i == start || (i == start + 1 && dot)) {
    out.problem = start < text.size() && text[start] == '-' ? detail::ByteSize::Problem::Negative
                                                            : detail::ByteSize::Problem::NoNumber;
    return out;
  }
  const std::string number(text.substr(start, i - start));
  while (i < text.size() && text[i] == ' ') ++i;
  out.unit = std::string(text.substr(i));
  while (!out.unit.empty() && out.unit.back() == ' ') out.unit.pop_back();
  std::string lower;
  for (char c : out.unit) lower += detail::ascii_lower(c);
  struct Unit {
    const char* name;
    double factor;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},
      {"b", 1},
      {"k", 1024.0},
      {"ki", 1024.0},
      {"kib", 1024.0},
      {"kb", 1e3},
      {"m", 1048576.0},
      {"mi", 1048576.0},
      {"mib", 1048576.0},
      {"mb", 1e6},
      {"g", 1073741824.0},
      {"gi", 1073741824.0},
      {"gib", 1073741824.0},
      {"gb", 1e9},
      {"t", 1099511627776.0},
      {"ti", 1099511627776.0},
      {"tib", 1099511627776.0},
      {"tb", 1e12},
  };
  const Unit* found = nullptr;
  for (const Unit& u : kUnits) {
    if (lower == u.name) found = &u;
  }
  if (found == nullptr) {
    out.problem = detail::ByteSize::Problem::UnknownUnit;
    return out;
  }
  // A number beyond any double reads as infinity: too large.
  const double count =
      detail::read_plain_number(number).value_or(std::numeric_limits<double>::infinity());
  const double value = count * found->factor;
  if (value == 0) {
    out.problem = detail::ByteSize::Problem::Zero;
  } else if (value > 1.8e19) {
    out.problem = detail::ByteSize::Problem::TooLarge;
  } else if (value != std::floor(value)) {
    out.problem = detail::ByteSize::Problem::NotWhole;
  } else {
    out.bytes = static_cast<std::uint64_t>(value);
  }
  return out;
}

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
  return detail::read_byte_size(text).bytes;
}

std::optional<double> parse_duration(std::string_view text) {
  text = detail::trim_blanks(text);
  std::string lower;
  for (char c : text) lower += detail::ascii_lower(c);
  if (lower == "inf" || lower == "infinity" || lower == "forever") {
    return std::numeric_limits<double>::infinity();
  }
  double factor = 1;
  std::string_view number = lower;
  if (!number.empty()) {
    switch (number.back()) {
      case 's':
        number.remove_suffix(1);
        break;
      case 'm':
        factor = 60;
        number.remove_suffix(1);
        break;
      case 'h':
        factor = 3600;
        number.remove_suffix(1);
        break;
      case 'd':
        factor = 86400;
        number.remove_suffix(1);
        break;
      default:
        break;
    }
  }
  number = detail::trim_blanks(number);
  // (Too large a number is infinity, and too small a one 0.)
  const std::optional<double> value = detail::read_decimal_number(number, true);
  if (!value) return std::nullopt;
  return *value * factor;
}

std::string format_seconds(double seconds) {
  if (std::isinf(seconds)) return "for ever";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", seconds);
  std::string out = buf;
  while (!out.empty() && out.back() == '0') out.pop_back();
  if (!out.empty() && out.back() == '.') out.pop_back();
  if (seconds >= 1e15) {
    std::snprintf(buf, sizeof buf, "%g", seconds);
    out = buf;
  }
  return out + " s";
}

std::optional<std::vector<int>> parse_cpu_list(std::string_view text) {
  std::vector<int> out;
  std::size_t i = 0;
  auto number = [&](int& v) {
    std::size_t s = i;
    long long acc = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && acc < 1000000)
      acc = acc * 10 + (text[i++] - '0');
    v = static_cast<int>(acc);
    return i > s && acc < 1000000;
  };
  if (text.empty()) return out;
  while (true) {
    int lo = 0, hi = 0;
    if (!number(lo)) return std::nullopt;
    hi = lo;
    if (i < text.size() && text[i] == '-') {
      ++i;
      if (!number(hi) || hi < lo) return std::nullopt;
    }
    for (int c = lo; c <= hi; ++c) out.push_back(c);
    if (i == text.size()) return out;
    if (text[i++] != ',') return std::nullopt;
  }
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >> (10 * (u + 1)) != 0) ++u;
  char buf[48];
  if (bytes >= (std::uint64_t{1} << 53)) {
    // Past a double's exact integers: as printf rounds the double (no memory is this large).
    double v = static_cast<double>(bytes);
    for (int k = 0; k < u; ++k) v /= 1024.0;  // exact (no libm: std::ldexp would load it)
    std::snprintf(buf, sizeof buf, v == std::floor(v) ? "%.0f %s" : "%.1f %s", v, kNames[u]);
    return buf;
  }
  // bytes / 1024^u, exactly, to one decimal, rounded as printf rounds (half to even): by hand, a
  // bind's report cost 2,400 instructions in snprintf's floating-point formatting.
  const unsigned shift = 10u * static_cast<unsigned>(u);
  std::uint64_t whole = bytes >> shift;
  const std::uint64_t rest = bytes - (whole << shift);
  std::string out;
  if (rest == 0) {
    out = std::to_string(whole);
  } else {
    const std::uint64_t scaled = rest * 10;  // < 10 * 2^40
    std::uint64_t tenth = scaled >> shift;
    const std::uint64_t left = scaled - (tenth << shift), half = std::uint64_t{1} << (shift - 1);
    if (left > half || (left == half && tenth % 2 == 1)) ++tenth;
    if (tenth == 10) {
      ++whole;
      tenth = 0;
    }
    out = std::to_string(whole) + "." + static_cast<char>('0' + tenth);
  }
  return out + " " + kNames[u];
}

}  // namespace gpusel::detail
