// Cache entries whose program is StableHLO bytecode (model.stablehlo.mlirbc,
// written by the PJRT plugin for JAX's format "mlir"): an entry with only that
// file is TODO, FindHloFile names it, and a model.hlo_module.pb beside it wins.
#include <gtest/gtest.h>

#include "npc/cache.h"
#include "support/test_support.h"

namespace npc::cache {
namespace {

TEST(StableHloEntryTest, ProgramFileMakesATodoEntryAndIsFound) {
  testing::TempDir tmp("npc-stablehlo-entry");
  LocalStore store(tmp.path());
  const EntryRef entry{"pjrt-test", "123", "d7517139"};
  auto empty = GetEntryState(store, entry, "model.pjrt");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, EntryState::kEmpty);

  ASSERT_TRUE(store.WriteAtomic(entry.file(kStableHloFile), "ML\xefR bytecode").ok());
  auto todo = GetEntryState(store, entry, "model.pjrt");
  ASSERT_TRUE(todo.ok());
  EXPECT_EQ(*todo, EntryState::kTodo);
  auto found = FindHloFile(store, entry);
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ(**found, kStableHloFile);

  ASSERT_TRUE(store.WriteAtomic(entry.file("model.pjrt"), "exe").ok());
  ASSERT_TRUE(store.WriteAtomic(entry.file(kDoneFile), "").ok());
  auto done = GetEntryState(store, entry, "model.pjrt");
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(*done, EntryState::kDone);

  ASSERT_TRUE(store.WriteAtomic(entry.file(kHloFile), "hlo").ok());
  found = FindHloFile(store, entry);
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ(**found, kHloFile);
}

}  // namespace
}  // namespace npc::cache
