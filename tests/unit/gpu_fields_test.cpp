// The one table of a GPU's fields (gpusel/gpu_fields.def): names, values and text cells.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "gpusel/gpu_fields.hpp"
#include "gpusel/visible.hpp"

namespace {

using gpusel::FieldKind;
using gpusel::GpuField;
using gpusel::GpuInfo;
using gpusel::GpuReading;
using gpusel::GpuView;

GpuInfo h100() {
  GpuInfo g;
  g.index = 3;
  g.uuid = "GPU-4ba71ab7-ac05-04a5-6cc6-be1805fdf179";
  g.name = "NVIDIA H100 80GB HBM3";
  g.pci_bus_id = "00000000:18:00.0";
  g.memory_total_bytes = 80ull << 30;
  g.cc_major = 9;
  g.cc_minor = 0;
  g.cpus = {0, 1, 2, 3, 8};
  return g;
}

TEST(GpuFields, EveryNameIsOneFieldAndFoundByIt) {
  std::set<std::string> names;
  for (const gpusel::FieldSpec& spec : gpusel::gpu_field_specs()) {
    EXPECT_TRUE(names.insert(spec.name).second) << spec.name << " is in the table twice";
    ASSERT_NE(gpusel::find_gpu_field(spec.name), nullptr);
    EXPECT_EQ(gpusel::find_gpu_field(spec.name)->field, spec.field);
    EXPECT_EQ(&gpusel::gpu_field_spec(spec.field), &spec);
    EXPECT_EQ(spec.cut != 0, spec.field == GpuField::uuid) << spec.name;
    // A cut column's header fits its cut width; a column without a header never gives way.
    if (spec.cut != 0) {
      EXPECT_GE(spec.cut, std::string(spec.header).size()) << spec.name;
    }
    if (*spec.header == '\0') {
      EXPECT_EQ(spec.give_way, 0u) << spec.name;
    }
  }
  // The MIG rows under a GPU use the NAME and UUID columns' widths: NAME never gives way, UUID
  // is cut, never dropped.
  EXPECT_EQ(gpusel::gpu_field_spec(GpuField::name).give_way, 0u);
  EXPECT_NE(gpusel::gpu_field_spec(GpuField::uuid).cut, 0u);
  EXPECT_EQ(gpusel::find_gpu_field("total_bytes"), nullptr);  // the one name is memory_total_bytes
  EXPECT_EQ(gpusel::find_gpu_field(""), nullptr);
  EXPECT_EQ(gpusel::gpu_reading_spec(GpuReading::persistence_mode).field,
            GpuField::persistence_mode);
}

TEST(GpuFields, ValuesOfAReadableGpu) {
  const GpuInfo g = h100();
  const GpuView v{g, 1, true};
  EXPECT_EQ(gpusel::gpu_field(v, GpuField::nvidia_smi_index).number, 3);
  EXPECT_EQ(gpusel::gpu_field(v, GpuField::cuda_ordinal).number, 1);
  EXPECT_EQ(gpusel::gpu_field(v, GpuField::uuid).text, g.uuid);
  EXPECT_EQ(gpusel::gpu_field(v, GpuField::memory_total_bytes).number, 80ll << 30);
  EXPECT_EQ(gpusel::gpu_field(v, GpuField::compute_capability).text, "9.0");
  EXPECT_EQ(gpusel::gpu_field(v, GpuField::cpus).text, "0-3,8");
  EXPECT_EQ(gpusel::gpu_field(v, GpuField::state).text, "ok");
  EXPECT_EQ(gpusel::gpu_field(v, GpuField::cuda_visibility).text, "visible");
  EXPECT_FALSE(gpusel::gpu_field(v, GpuField::failure).present);
  EXPECT_FALSE(gpusel::gpu_field(v, GpuField::numa_node).present);
  EXPECT_FALSE(gpusel::gpu_field(v, GpuField::memory_used_bytes).present);  // usage not read
  EXPECT_EQ(gpusel::gpu_field_cell(v, GpuField::memory_total_bytes), "80 GiB");
  EXPECT_EQ(gpusel::gpu_field_cell(v, GpuField::numa_node), "-");
  EXPECT_EQ(gpusel::gpu_field_cell(v, GpuField::utilization_percent), "?");
}

TEST(GpuFields, HiddenUnknownAndLost) {
  GpuInfo g = h100();
  EXPECT_EQ(gpusel::gpu_field_cell(GpuView{g, -1, true}, GpuField::cuda_ordinal), "-");
  EXPECT_EQ(gpusel::gpu_field(GpuView{g, -1, true}, GpuField::cuda_visibility).text, "hidden");
  EXPECT_EQ(gpusel::gpu_field_cell(GpuView{g, -1, false}, GpuField::cuda_ordinal), "?");
  EXPECT_EQ(gpusel::gpu_field(GpuView{g, -1, false}, GpuField::cuda_visibility).text, "unknown");
  g.problem.code = gpusel::ErrorCode::GpuLost;
  g.failure = "lost: fell off the bus";
  g.memory_total_bytes = 0;
  const GpuView lost{g, -1, true};
  EXPECT_EQ(gpusel::gpu_field(lost, GpuField::state).text, "lost");
  EXPECT_EQ(gpusel::gpu_field(lost, GpuField::failure).text, g.failure);
  EXPECT_FALSE(gpusel::gpu_field(lost, GpuField::uuid).present);
  EXPECT_FALSE(gpusel::gpu_field(lost, GpuField::memory_total_bytes).present);
}

TEST(GpuFields, ReadingsAreNumbersAndFlags) {
  GpuInfo g = h100();
  const GpuView v{g, 0, true};
  EXPECT_FALSE(gpusel::gpu_field(v, GpuField::persistence_mode).present);
  g.readings[static_cast<std::size_t>(GpuReading::persistence_mode)] = 0;
  EXPECT_TRUE(gpusel::gpu_field(v, GpuField::persistence_mode).present);
  EXPECT_EQ(gpusel::gpu_field(v, GpuField::persistence_mode).number, 0);
  g.readings[static_cast<std::size_t>(GpuReading::persistence_mode)] = 1;
  EXPECT_EQ(gpusel::gpu_field_cell(v, GpuField::persistence_mode), "yes");
  const gpusel::FieldSpec& spec = gpusel::gpu_field_spec(GpuField::persistence_mode);
  EXPECT_EQ(spec.kind, FieldKind::Flag);
  EXPECT_EQ(gpusel::field_plain_text(spec, gpusel::gpu_field(v, GpuField::persistence_mode)), "1");
}

TEST(GpuFields, DriverTextIsPrintedEscaped) {
  GpuInfo g = h100();
  g.name = "evil\x1b[2Jname";
  const std::string cell = gpusel::gpu_field_cell(GpuView{g, 0, true}, GpuField::name);
  EXPECT_EQ(cell.find('\x1b'), std::string::npos) << cell;
  // The C ABI's plain text is the driver's text as it is: the caller decides how to show it.
  const gpusel::FieldSpec& spec = gpusel::gpu_field_spec(GpuField::name);
  EXPECT_EQ(gpusel::field_plain_text(spec, gpusel::gpu_field(GpuView{g, 0, true}, GpuField::name)),
            g.name);
}

}  // namespace
