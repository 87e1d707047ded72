// Checkpoints of bfloat16 variables (docs/checkpoint-format.md, "Variable dtypes"): stored in
// 2 bytes, restored bitwise on any mesh; across dtypes bfloat16 into float32 widens exactly and
// float32 into bfloat16 rounds to nearest even, with one line saying so. Stochastically rounded
// variables resume bitwise (their random bits follow Program::step(), which checkpoints keep).

#include <mtk/base/error.hpp>
#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/kernels/bfloat16.hpp>

#include <gtest/gtest.h>
#include <mpi.h>

#include "../mtk_test_util.hpp"
#include "../temp_dir.hpp"
#include "ckpt_test_model.hpp"
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

using namespace mtk;
using namespace mtk::test;

namespace {

std::map<std::string, std::vector<float>> all_values(Program& p) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& n : p.variable_names())
    out[n] = p.variable_value(n).values<float>();
  return out;
}

// A tiny model trained `steps` steps on the checkpoint test mesh, stored as `stored`, saved.
struct Saved {
  std::map<std::string, std::vector<float>> values;
  std::string path;
  float next_loss = 0;
};

Saved train_and_save(const TempDir& dir, DType stored, int steps) {
  Mesh mesh(checkpoint_test_mesh(world_size()), MPI_COMM_WORLD);
  TinyModel a = make_tiny_model(mesh, rules_a(), 12, stored);
  for (int s = 0; s < steps; ++s)
    a.train_step();
  Saved out;
  out.values = all_values(*a.program);
  out.path = CheckpointManager(dir.path(), 2, mesh).save(*a.program, {});
  out.next_loss = a.train_step();
  return out;
}

}  // namespace

TEST(CheckpointDtypes, Bf16VariablesSaveInTwoBytesAndRestoreBitwiseOnAnyMesh) {
  TempDir dir(MPI_COMM_WORLD);
  const Saved saved = train_and_save(dir, DType::bfloat16, 2);
  std::int64_t bytes = 0;
  for (const auto& [name, v] : saved.values) {
    bytes += static_cast<std::int64_t>(v.size()) * (name == "global_step" ? 4 : 2);
    if (name == "global_step")
      continue;
    for (float x : v) {
      ASSERT_EQ(kernels::round_to_bfloat16(x), x) << name;
    }
  }
  const CheckpointVerification v = verify_checkpoint(saved.path, MPI_COMM_WORLD);
  EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors.front());
  EXPECT_EQ(v.bytes_hashed, bytes) << "bf16 values are stored in 2 bytes";
  const CheckpointInfo info = checkpoint_info(saved.path);
  EXPECT_EQ(info.variable_bytes, bytes);
  for (const auto& var : info.variables)
    EXPECT_EQ(var.dtype, var.name == "global_step" ? "float32" : "bfloat16") << var.name;
  EXPECT_NE(format_checkpoint_info(info).find("float32 and bfloat16"), std::string::npos);

  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh other(mshape, MPI_COMM_WORLD);
    for (const auto& rules : {rules_b(), rules_c()}) {
      const std::string where = mshape.to_string() + " layout " + rules.to_string();
      TinyModel b = make_tiny_model(other, rules, 12, DType::bfloat16);
      ::testing::internal::CaptureStdout();
      restore_checkpoint(*b.program, saved.path);
      const std::string said = ::testing::internal::GetCapturedStdout();
      EXPECT_EQ(said.find("rounded"), std::string::npos) << where << ": " << said;
      EXPECT_EQ(all_values(*b.program), saved.values) << where;
      const float loss = b.train_step();
      EXPECT_NEAR(loss, saved.next_loss, 1e-5 * std::max(1.0f, std::fabs(saved.next_loss)))
          << where;
    }
  }
}

TEST(CheckpointDtypes, StochasticRoundingResumesBitwise) {
  TempDir dir(MPI_COMM_WORLD);
  Mesh mesh(checkpoint_test_mesh(world_size()), MPI_COMM_WORLD);
  const int total = 5, first = 2;
  auto model = [&] {
    return make_tiny_model(mesh, rules_a(), 12, DType::bfloat16, Rounding::stochastic);
  };
  TinyModel reference = model();
  for (int s = 0; s < total; ++s)
    reference.train_step();
  std::string path;
  {
    TinyModel part = model();
    for (int s = 0; s < first; ++s)
      part.train_step();
    path = CheckpointManager(dir.path(), 2, mesh).save(*part.program, {});
  }
  TinyModel resumed = model();
  restore_checkpoint(*resumed.program, path);
  ASSERT_EQ(resumed.program->step(), first) << "the counter the random bits follow";
  for (int s = first; s < total; ++s)
    resumed.train_step();
  // Every update drew the bits the uninterrupted run drew: bitwise the same variables.
  EXPECT_EQ(all_values(*resumed.program), all_values(*reference.program));
}

TEST(CheckpointDtypes, Bf16IntoFloat32WidensExactly) {
  TempDir dir(MPI_COMM_WORLD);
  const Saved saved = train_and_save(dir, DType::bfloat16, 2);
  Mesh mesh(meshes_of_size(world_size()).front(), MPI_COMM_WORLD);
  TinyModel b = make_tiny_model(mesh, LayoutRules(), 12, DType::float32);
  restore_checkpoint(*b.program, saved.path);
  EXPECT_EQ(all_values(*b.program), saved.values);
  for (const auto& name : b.program->variable_names())
    EXPECT_EQ(b.program->variable_storage_dtype(name), DType::float32) << name;
}

TEST(CheckpointDtypes, Float32IntoBf16RoundsToNearestEvenAndSaysSo) {
  TempDir dir(MPI_COMM_WORLD);
  const Saved saved = train_and_save(dir, DType::float32, 2);
  Mesh mesh(meshes_of_size(world_size()).back(), MPI_COMM_WORLD);
  TinyModel b = make_tiny_model(mesh, rules_b(), 12, DType::bfloat16);
  ::testing::internal::CaptureStdout();
  restore_checkpoint(*b.program, saved.path);
  const std::string said = ::testing::internal::GetCapturedStdout();
  if (world_rank() == 0) {
    EXPECT_NE(said.find("10 float32 variables"), std::string::npos) << said;
    EXPECT_NE(said.find("rounded to their bfloat16 storage (nearest even)"), std::string::npos)
        << said;
    EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
  } else {
    EXPECT_EQ(said, "");
  }
  std::int64_t changed = 0;
  for (const auto& [name, got] : all_values(*b.program)) {
    const auto& want = saved.values.at(name);
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < got.size(); ++i) {
      const float expected = name == "global_step" ? want[i] : kernels::round_to_bfloat16(want[i]);
      EXPECT_EQ(got[i], expected) << name << " [" << i << "]";
      changed += got[i] != want[i];
    }
  }
  EXPECT_GT(changed, 100) << "float32 values were rounded";
}

TEST(CheckpointDtypes, UnknownDtypeInMetadataIsRefused) {
  TempDir dir(MPI_COMM_WORLD);
  const Saved saved = train_and_save(dir, DType::bfloat16, 1);
  if (world_rank() == 0) {
    const std::string file = saved.path + "/metadata.yaml";
    std::ifstream in(file);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto at = text.find("dtype: bfloat16");
    ASSERT_NE(at, std::string::npos) << text;
    text.replace(at, 15, "dtype: float16");
    std::ofstream(file) << text;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  try {
    checkpoint_info(saved.path);
    ADD_FAILURE() << "float16 accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const char* part : {"'float16'", "float32", "bfloat16"})
      EXPECT_NE(what.find(part), std::string::npos) << what;
  }
}
