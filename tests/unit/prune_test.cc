// npc prune's pure parts: size and duration parsing, and the LRU choice.
#include "generator/prune.h"

#include <gtest/gtest.h>

namespace npc::tool {
namespace {

TEST(ParseByteSize, UnitsAreBinaryMultiples) {
  EXPECT_EQ(*ParseByteSize("512"), 512);
  EXPECT_EQ(*ParseByteSize("10K"), 10 * 1024);
  EXPECT_EQ(*ParseByteSize("1.5G"), int64_t{3} * 512 * 1024 * 1024);
  EXPECT_EQ(*ParseByteSize("2TiB"), int64_t{2} << 40);
  EXPECT_EQ(*ParseByteSize("20gb"), int64_t{20} << 30);
  for (const char* bad : {"", "G", "-1G", "10X", "1..2M", "1e3"}) {
    auto r = ParseByteSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find(std::string("'") + bad + "'"), std::string::npos) << r.error().message;
  }
}

TEST(ParseDuration, SecondsMinutesHoursDays) {
  EXPECT_EQ(*ParseDuration("3600"), 3600);
  EXPECT_EQ(*ParseDuration("90m"), 5400);
  EXPECT_EQ(*ParseDuration("12h"), 43200);
  EXPECT_EQ(*ParseDuration("30d"), 30 * 86400);
  EXPECT_EQ(*ParseDuration("0.5d"), 43200);
  EXPECT_FALSE(ParseDuration("2w").ok());
  EXPECT_FALSE(ParseDuration("h").ok());
}

std::vector<std::string> Dirs(const std::vector<PruneCandidate>& v) {
  std::vector<std::string> out;
  for (const auto& c : v) out.push_back(c.dir);
  return out;
}

TEST(ChoosePruneVictims, AgeLimitTakesEveryOldEntry) {
  const int64_t now = 1'000'000;
  std::vector<PruneCandidate> c = {{"a", 10, now - 100}, {"b", 10, now - 5000}, {"c", 10, now - 9000}};
  EXPECT_EQ(Dirs(ChoosePruneVictims(c, std::nullopt, 1000, now)), (std::vector<std::string>{"c", "b"}));
  EXPECT_TRUE(ChoosePruneVictims(c, std::nullopt, 10000, now).empty());
}

TEST(ChoosePruneVictims, SizeLimitTakesLeastRecentlyUsedUntilItFits) {
  const int64_t now = 1'000'000;
  std::vector<PruneCandidate> c = {{"new", 100, now - 1}, {"old", 100, now - 300}, {"mid", 100, now - 200}};
  EXPECT_EQ(Dirs(ChoosePruneVictims(c, 150, std::nullopt, now)), (std::vector<std::string>{"old", "mid"}));
  EXPECT_EQ(Dirs(ChoosePruneVictims(c, 200, std::nullopt, now)), (std::vector<std::string>{"old"}));
  EXPECT_TRUE(ChoosePruneVictims(c, 300, std::nullopt, now).empty());
  EXPECT_EQ(ChoosePruneVictims(c, 0, std::nullopt, now).size(), 3u);
  // Equal last use: ordered by dir, so the choice is deterministic.
  std::vector<PruneCandidate> tie = {{"y", 100, 5}, {"x", 100, 5}};
  EXPECT_EQ(Dirs(ChoosePruneVictims(tie, 100, std::nullopt, now)), (std::vector<std::string>{"x"}));
}

TEST(ChoosePruneVictims, BothLimits) {
  const int64_t now = 1'000'000;
  std::vector<PruneCandidate> c = {{"a", 100, now - 10}, {"b", 100, now - 20}, {"c", 100, now - 99999}};
  // c is too old; then a+b = 200 > 150: b goes too.
  EXPECT_EQ(Dirs(ChoosePruneVictims(c, 150, 1000, now)), (std::vector<std::string>{"c", "b"}));
}

}  // namespace
}  // namespace npc::tool
