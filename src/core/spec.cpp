// Parsing of --gpu values.
#include "gpusel/spec.hpp"

#include <algorithm>
#include <unordered_map>

#include "gpusel/error.hpp"
#include "gpusel/pick.hpp"
#include "gpusel_detail.hpp"
#include "text.hpp"

GPUSEL_BEGIN_NAMESPACE
namespace {

using detail::is_blank;
using detail::strip_zeros;
constexpr auto trim = detail::trim_blanks;
constexpr auto lower = detail::ascii_lower;

constexpr std::string_view kUuidHead = "GPU-";

// What `same_entry` compares: an index without its leading zeros, a UUID in lower case.
std::string entry_key(std::string_view entry) {
  if (is_gpu_index(entry)) return std::string(strip_zeros(entry));
  std::string key(entry);
  for (char& c : key) c = lower(c);
  return key;
}

}  // namespace

bool is_gpu_uuid(std::string_view entry) noexcept {
  return entry.size() >= kUuidHead.size() &&
         detail::equal_ci(entry.substr(0, kUuidHead.size()), kUuidHead);
}

bool is_gpu_index(std::string_view entry) noexcept {
  return detail::all_digits(entry);
}

namespace {

bool is_hex(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Splits on blanks.
std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_blank(text[i])) ++i;
    std::size_t start = i;
    while (i < text.size() && !is_blank(text[i])) ++i;
    if (i > start) out.push_back(text.substr(start, i - start));
  }
  return out;
}

// The hint for an entry copied from somewhere that speaks of GPUs differently, or "": a line of
// `nvidia-smi -L` or its "(UUID: GPU-...)" part, a CUDA ordinal such as cuda:1, "all", a UUID
// without its GPU- head, "GPU 0", several entries separated by blanks instead of commas.
std::string pasted_entry_hint(std::string_view entry) {
  // nvidia-smi -L: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-4ba71ab7-...)".
  for (std::size_t at = 0; at + 5 <= entry.size(); ++at) {
    if (!detail::equal_ci(entry.substr(at, 5), "UUID:")) continue;
    std::string_view rest = trim(entry.substr(at + 5));
    std::size_t end = 0;
    while (end < rest.size() &&
           (is_hex(rest[end]) || rest[end] == '-' ||
            (end < 4 && std::string_view("GPUMIgpumi").find(rest[end]) != std::string_view::npos)))
      ++end;
    const std::string_view uuid = rest.substr(0, end);
    if (detail::starts_with_ci(uuid, "MIG-")) break;  // the MIG hint below
    if (!is_gpu_uuid(uuid)) break;
    std::string index;
    if (detail::starts_with_ci(entry, "GPU ")) {
      std::size_t i = 4;
      while (i < entry.size() && entry[i] >= '0' && entry[i] <= '9') index += entry[i++];
    }
    return "; that is " + std::string(index.empty() ? "part of a line" : "a line") +
           " of `nvidia-smi -L`: give the UUID alone, " +
           detail::gpu_example(std::string(kUuidHead) +
                               std::string(uuid.substr(kUuidHead.size()))) +
           (index.empty() ? "" : " (or its nvidia-smi index, " + detail::gpu_example(index) + ")");
  }
  // PyTorch's device names.
  if (detail::starts_with_ci(entry, "cuda")) {
    std::string_view rest = entry.substr(4);
    if (rest.empty() || rest.front() == ':') {
      return "; " + detail::quote_value(entry) +
             " is a CUDA ordinal (PyTorch's device name), which changes with "
             "CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER; " +
             detail::reader_text(
                 "--gpu takes nvidia-smi indices or GPU UUIDs, which do not: the "
                 "CUDA column of `gpusel list` shows which GPU each CUDA ordinal "
                 "is here",
                 "a GPU request takes nvidia-smi indices or GPU UUIDs, which do "
                 "not: gpusel_list_gpus gives each GPU's CUDA ordinal here");
    }
  }
  if (detail::equal_ci(entry, "all")) {
    return "; \"all\" (every GPU CUDA_VISIBLE_DEVICES lets this process use) stands alone, "
           "and only in a request (`gpusel resolve`, `gpusel run`, `gpusel bench bw`, "
           "gpusel_resolve, Python's resolve_gpu_uuids); here, name the GPUs";
  }
  // A UUID without GPU-: eight hex digits, a dash, then hex digits and dashes.
  if (entry.size() >= 9 && entry[8] == '-' &&
      std::all_of(entry.begin(), entry.begin() + 8, is_hex) &&
      std::all_of(entry.begin(), entry.end(), [](char c) { return is_hex(c) || c == '-'; })) {
    return "; a GPU UUID starts with GPU-, as `nvidia-smi -L` prints it: " +
           detail::gpu_example("GPU-" + std::string(entry));
  }
  // "GPU 0", "GPU0", "gpu:0": nvidia-smi's label for index 0.
  if (detail::starts_with_ci(entry, "GPU")) {
    std::string_view rest = trim(entry.substr(3));
    if (!rest.empty() && (rest.front() == ':' || rest.front() == '#')) rest = trim(rest.substr(1));
    if (is_gpu_index(rest)) {
      return "; for nvidia-smi's GPU " + std::string(rest) +
             ", give the index alone: " + detail::gpu_example(rest);
    }
  }
  // "0 1" or "GPU-a GPU-b": blanks where commas belong.
  const std::vector<std::string_view> parts = words(entry);
  if (parts.size() > 1 && std::all_of(parts.begin(), parts.end(), [](std::string_view w) {
        return is_gpu_index(w) || is_gpu_uuid(w);
      })) {
    std::string joined;
    for (std::string_view w : parts) joined += (joined.empty() ? "" : ",") + std::string(w);
    return "; entries are separated by commas, not blanks: " + detail::gpu_example(joined);
  }
  return "";
}

// The data of a refused GPU request, or of one entry of it.
Problem request_problem(std::string_view value, const char* reason) {
  return about(Subject::GpuRequest, {{"request", std::string(value)}, {"reason", reason}});
}
Problem entry_problem(std::string_view entry, const char* reason) {
  return about(Subject::GpuEntry, {{"entry", std::string(entry)}, {"reason", reason}});
}

// Whole-value mistakes, before the entries are read: a list pasted one entry a line (`gpusel
// resolve`'s output without `| paste -sd,`), and entries separated by blanks ("GPU-a GPU-b",
// which would otherwise read as one UUID prefix that matches nothing).
void precheck_pasted(std::string_view value) {
  const std::string_view inner = trim(value);
  // A shell assignment copied in whole: CUDA_VISIBLE_DEVICES=2,3.
  if (const std::size_t eq = inner.find('=');
      eq != std::string_view::npos && eq > 0 &&
      std::all_of(inner.begin(), inner.begin() + static_cast<std::ptrdiff_t>(eq), [](char c) {
        return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
               (c >= 'A' && c <= 'Z');
      })) {
    const std::string_view name = inner.substr(0, eq);
    throw bad_input(
        detail::gpu_request_words() + " " + detail::quote_value(value) + " is the assignment of " +
            std::string(name) + "; " + detail::reader_text("--gpu takes", "a GPU request names") +
            " the GPUs themselves: " + detail::gpu_example(trim(inner.substr(eq + 1))) +
            (name == "CUDA_VISIBLE_DEVICES"
                 ? detail::reader_text(" (as nvidia-smi indices or UUIDs; `gpusel list` "
                                       "shows how CUDA numbers them)",
                                       " (as nvidia-smi indices or UUIDs; "
                                       "gpusel_list_gpus shows how CUDA numbers them)")
                 : ""),
        about(Subject::GpuRequest, {{"request", std::string(value)},
                                    {"reason", "assignment"},
                                    {"variable", std::string(name)}}));
  }
  if (inner.find_first_of("\n\r") != std::string_view::npos) {
    const auto lines = 1 + std::count(inner.begin(), inner.end(), '\n');
    throw bad_input(
        detail::gpu_request_words() + " " + detail::quote_value(value) + " holds " +
            std::to_string(lines) +
            detail::reader_text(
                " lines; it takes one line, entries separated by commas (was the output "
                "of `gpusel resolve` pasted in as it is?): join the lines with commas, as "
                "`gpusel resolve --gpu SPEC --format csv` prints them, or pipe through "
                "`paste -sd,`",
                " lines; a request is one line, entries separated by commas: join the "
                "lines with commas"),
        request_problem(value, "several-lines"));
  }
  detail::each_comma_piece(value, [](std::string_view piece) {
    piece = trim(piece);
    if (is_gpu_uuid(piece) && std::any_of(piece.begin(), piece.end(), is_blank)) {
      throw bad_input(detail::gpu_entry_words() + " " + detail::quote_value(piece) +
                          " holds blanks" + pasted_entry_hint(piece) +
                          detail::reader_text("; run `gpusel list` to see every GPU's UUID",
                                              "; `nvidia-smi -L` lists every GPU's UUID"),
                      entry_problem(piece, "blanks"));
    }
    return true;
  });
}

}  // namespace

namespace {

GpuEntry read_entry(std::string_view piece) {
  GpuEntry e;
  e.text = detail::canonical_entry(piece);  // refuses what is neither
  if (is_gpu_uuid(e.text)) {
    e.kind = GpuEntry::Kind::Uuid;
  } else {
    e.index = detail::read_decimal(e.text).value_or(UINT64_MAX);
  }
  return e;
}

// The named GPUs of a --gpu value: parse_gpu_spec's rules.
std::vector<GpuEntry> read_entries(std::string_view value) {
  precheck_pasted(value);
  std::vector<GpuEntry> entries;
  entries.reserve(static_cast<std::size_t>(std::count(value.begin(), value.end(), ',')) + 1);
  detail::each_comma_piece(value, [&entries](std::string_view piece) {
    piece = trim(piece);
    if (!piece.empty()) entries.push_back(read_entry(piece));
    return true;
  });
  if (entries.empty()) {
    throw bad_input(
        detail::gpu_request_words() + " " + detail::quote_value(value) +
            " names no GPU; give nvidia-smi indices or GPU UUIDs separated by commas " +
            detail::reader_text("(run `gpusel list` to see them)", "(`nvidia-smi -L` lists them)"),
        request_problem(value, "empty"));
  }
  const GpuEntry& head = entries.front();
  for (const GpuEntry& e : entries) {
    if (e.kind != head.kind) {
      throw bad_input(
          detail::gpu_request_words() + " " + detail::quote_value(value) + " mixes UUIDs (" +
              detail::quote_value(head.is_uuid() ? head.text : e.text) + ") and indices (" +
              detail::quote_value(head.is_uuid() ? e.text : head.text) +
              "); use one kind for the whole list, as CUDA_VISIBLE_DEVICES requires",
          request_problem(value, "mixed-kinds"));
    }
  }
  // Each entry once: `same_entry` is equality of these keys. The first repeat is found by
  // comparing each key with those before it in a list of a machine's size, and with a hash set in
  // a longer one (a quadratic scan took minutes over a megabyte of indices; a set costs a node
  // allocation per entry, too much for the eight GPUs of every launch).
  const auto twice = [&](std::size_t first, std::size_t repeat) {
    return bad_input(detail::gpu_request_words() + " " + detail::quote_value(value) +
                         " names the same GPU twice (" + detail::quote_value(entries[first].text) +
                         " and " + detail::quote_value(entries[repeat].text) +
                         "); each rank needs a GPU of its own",
                     request_problem(value, "same-gpu-twice"));
  };
  constexpr std::size_t kCompareEach = 64;
  if (entries.size() <= kCompareEach) {
    std::vector<std::string> keys;
    keys.reserve(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      keys.push_back(entry_key(entries[i].text));
      for (std::size_t j = 0; j < i; ++j) {
        if (keys[j] == keys[i]) throw twice(j, i);
      }
    }
    return entries;
  }
  std::unordered_map<std::string, std::size_t> first;
  first.reserve(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto [seen, fresh] = first.emplace(entry_key(entries[i].text), i);
    if (!fresh) throw twice(seen->second, i);
  }
  return entries;
}

}  // namespace

std::vector<std::string> GpuRequest::texts() const {
  switch (kind) {
    case Kind::All:
      return {"all"};
    case Kind::Free:
      return {"free:" + std::to_string(free_count)};
    case Kind::Gpus:
      break;
  }
  std::vector<std::string> out;
  out.reserve(gpus.size());
  for (const GpuEntry& e : gpus) out.push_back(e.text);
  return out;
}

GpuRequest read_gpu_request(std::string_view value, bool all_allowed) {
  GpuRequest r;
  if (all_allowed && detail::is_all_entry(value)) {
    r.kind = GpuRequest::Kind::All;
  } else if (const std::optional<int> n = detail::parse_free_request(value)) {
    r.kind = GpuRequest::Kind::Free;
    r.free_count = *n;
  } else {
    r.gpus = read_entries(value);
  }
  return r;
}

std::vector<std::string> parse_gpu_spec(std::string_view value) {
  return read_gpu_request(value, false).texts();
}

std::vector<std::string> parse_gpu_request(std::string_view value) {
  return read_gpu_request(value).texts();
}

GpuRequest read_single_gpu(std::string_view value) {
  GpuRequest r = read_gpu_request(value, false);
  if (r.kind == GpuRequest::Kind::Gpus && r.gpus.size() != 1) {
    throw bad_input(detail::gpu_request_words() + " " + detail::quote_value(value) + " holds " +
                        std::to_string(r.gpus.size()) +
                        detail::reader_text(" GPUs, but this option takes exactly one",
                                            " GPUs, but exactly one is asked for") +
                        "; give a single index or UUID",
                    request_problem(value, "not-one-gpu"));
  }
  return r;
}

std::string parse_single_gpu(std::string_view value) {
  return read_single_gpu(value).texts().front();
}

GPUSEL_END_NAMESPACE

namespace gpusel::detail {

std::string canonical_entry(std::string_view entry) {
  if (is_gpu_uuid(entry))
    return std::string(kUuidHead) + std::string(entry.substr(kUuidHead.size()));
  if (is_gpu_index(entry)) return std::string(entry);
  std::string hint = pasted_entry_hint(entry);  // a value copied from elsewhere, or ""
  if (hint.empty() && entry.size() >= 4 && detail::equal_ci(entry.substr(0, 4), "MIG-")) {
    hint = detail::reader_text("; MIG devices cannot be given to --gpu",
                               "; MIG devices cannot be given in a GPU request") +
           ": gpusel places processes on whole GPUs";
  } else if (hint.empty() && entry.find('-') != std::string_view::npos &&
             is_gpu_index(entry.substr(0, 1))) {
    hint = "; ranges are not accepted, list each index (for example 0,1,2,3)";
  }
  throw bad_input(
      detail::gpu_entry_words() + " " + detail::quote_value(entry) +
          " is neither a GPU index (ASCII digits: nvidia-smi's, or rocm-smi's on AMD GPUs) nor "
          "a GPU UUID (GPU-..., a unique prefix is enough)" +
          hint +
          detail::reader_text("; run `gpusel list` to see both for every GPU",
                              "; `gpusel list` (or nvidia-smi -L, rocm-smi --showuniqueid) "
                              "shows both for every GPU"),
      about(Subject::GpuEntry, {{"entry", std::string(entry)}, {"reason", "unreadable"}}));
}

bool same_entry(std::string_view a, std::string_view b) noexcept {
  if (is_gpu_index(a) && is_gpu_index(b)) return strip_zeros(a) == strip_zeros(b);
  return detail::equal_ci(a, b);
}

bool is_all_entry(std::string_view entry) noexcept {
  return detail::equal_ci(trim(entry), "all");
}

bool starts_with_ci(std::string_view text, std::string_view head) noexcept {
  return text.size() >= head.size() && detail::equal_ci(text.substr(0, head.size()), head);
}

bool amd_id_form(std::string_view entry) noexcept {
  return entry.size() > 4 && entry.size() <= 20 && starts_with_ci(entry, "GPU-") &&
         entry.find('-', 4) == std::string_view::npos;
}

bool equal_ci(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return lower(x) == lower(y); });
}

std::string join_entries(const std::vector<std::string>& entries) {
  std::string out;
  for (const auto& e : entries) {
    if (!out.empty()) out += ',';
    out += e;
  }
  return out;
}

}  // namespace gpusel::detail
