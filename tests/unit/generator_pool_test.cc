// Pool depth arithmetic and the compile-memory record (generator/pool.h).
#include "generator/pool.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "support/test_support.h"

namespace npc::tool {
namespace {

constexpr int64_t GiB = int64_t{1} << 30;

TEST(PoolTest, ParsesMemAvailable) {
  const char* meminfo =
      "MemTotal:       24597748 kB\n"
      "MemFree:         1234567 kB\n"
      "MemAvailable:   20971520 kB\n"
      "Buffers:          123456 kB\n";
  EXPECT_EQ(ParseMemAvailable(meminfo), int64_t{20971520} * 1024);
  EXPECT_EQ(ParseMemAvailable("MemTotal: 1 kB\n"), std::nullopt);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: lots kB\n"), std::nullopt);
  EXPECT_EQ(ParseMemAvailable(""), std::nullopt);
}

TEST(PoolTest, ThisHostHasMemAvailable) {
  auto mem = MemAvailableBytes();
  ASSERT_TRUE(mem.has_value());
  EXPECT_GT(*mem, 0);
}

TEST(PoolTest, DepthArithmetic) {
  // neuronx-cc: 64 GiB per compile.
  EXPECT_EQ(ComputePoolDepth(std::nullopt, 512 * GiB, 64 * GiB, 8), 8);
  EXPECT_EQ(ComputePoolDepth(std::nullopt, 500 * GiB, 64 * GiB, 8), 7);  // rounds down
  EXPECT_EQ(ComputePoolDepth(std::nullopt, 20 * GiB, 64 * GiB, 8), 1);   // never below 1
  EXPECT_EQ(ComputePoolDepth(4, 512 * GiB, 64 * GiB, 8), 4);             // --num_parallel is a bound
  EXPECT_EQ(ComputePoolDepth(16, 512 * GiB, 64 * GiB, 8), 8);            // memory is a bound too
  EXPECT_EQ(ComputePoolDepth(3, 1 * GiB, 64 * GiB, 8), 1);
  // Unknown memory: --num_parallel, else the fallback.
  EXPECT_EQ(ComputePoolDepth(5, std::nullopt, 64 * GiB, 8), 5);
  EXPECT_EQ(ComputePoolDepth(std::nullopt, std::nullopt, 64 * GiB, 8), 8);
  EXPECT_EQ(ComputePoolDepth(std::nullopt, 10 * GiB, 0, 2), 2);
  EXPECT_EQ(ComputePoolDepth(std::nullopt, std::nullopt, 64 * GiB, 0), 1);
}

TEST(PoolTest, PerCompileEstimate) {
  EXPECT_EQ(PerCompileEstimate(std::nullopt, GiB), GiB);
  EXPECT_EQ(PerCompileEstimate(int64_t{200} << 20, GiB), int64_t{300} << 20);  // measured x 1.5
  EXPECT_EQ(PerCompileEstimate(0, GiB), GiB);
}

TEST(PoolTest, CompileMemoryRecordKeepsTheMaximum) {
  npc::testing::TempDir tmp;
  EXPECT_EQ(ReadCompileMemory(tmp.path()), std::nullopt);
  RecordCompileMemory(tmp.path(), 1000);
  EXPECT_EQ(ReadCompileMemory(tmp.path()), 1000);
  RecordCompileMemory(tmp.path(), 500);
  EXPECT_EQ(ReadCompileMemory(tmp.path()), 1000);
  RecordCompileMemory(tmp.path(), 0);
  EXPECT_EQ(ReadCompileMemory(tmp.path()), 1000);
  // Concurrent writers lose no maximum.
  std::vector<std::thread> threads;
  for (int i = 1; i <= 8; ++i) {
    threads.emplace_back([&, i] {
      for (int j = 0; j < 50; ++j) RecordCompileMemory(tmp.path(), 1000 + i * 100 + j);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ReadCompileMemory(tmp.path()), 1000 + 800 + 49);
}

}  // namespace
}  // namespace npc::tool
