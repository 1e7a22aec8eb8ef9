#include "common/net/shard_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace nereus {
namespace {

TEST(ShardMapTest, CutsTensorsIntoPartitionsOfAtMostPartitionBytes) {
  auto map = ShardMap::Build({10, 4, 0, 1}, /*partition_bytes=*/16, /*num_servers=*/2);
  ASSERT_TRUE(map.ok()) << map.status();
  ASSERT_EQ(map->num_tensors(), 4);
  const auto& t0 = map->partitions(0);
  ASSERT_EQ(t0.size(), 3u);
  EXPECT_EQ(t0[0].offset, 0u);
  EXPECT_EQ(t0[0].length, 4u);
  EXPECT_EQ(t0[1].offset, 4u);
  EXPECT_EQ(t0[2].offset, 8u);
  EXPECT_EQ(t0[2].length, 2u);
  EXPECT_EQ(map->partitions(1).size(), 1u);
  EXPECT_TRUE(map->partitions(2).empty());
  EXPECT_EQ(map->partitions(3)[0].length, 1u);
  EXPECT_EQ(map->server_bytes(0) + map->server_bytes(1), 15u * 4);
}

TEST(ShardMapTest, PlacementByHand) {
  // Partitions of 4 elements: t0 -> [4,4,2], t1 -> [4], t2 -> [3].
  // Largest first (ties in registration order): t0c0, t0c1, t1c0, t2c0, t0c2.
  // s0 <- t0c0 (16B); s1 <- t0c1 (16B); s0 <- t1c0 (32B); s1 <- t2c0 (28B); s1 <- t0c2 (36B).
  auto map = ShardMap::Build({10, 4, 3}, 16, 2);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->partitions(0)[0].server, 0);
  EXPECT_EQ(map->partitions(0)[1].server, 1);
  EXPECT_EQ(map->partitions(1)[0].server, 0);
  EXPECT_EQ(map->partitions(2)[0].server, 1);
  EXPECT_EQ(map->partitions(0)[2].server, 1);
  EXPECT_EQ(map->server_bytes(0), 32u);
  EXPECT_EQ(map->server_bytes(1), 36u);
}

TEST(ShardMapTest, BalancedWithinOnePartitionOnRandomModels) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint64_t> sizes(1 + rng() % 40);
    for (auto& s : sizes) s = rng() % 3 == 0 ? rng() % 50 : rng() % 200000;
    const uint64_t partition_bytes = 4 * (1 + rng() % 30000);
    const int servers = 1 + rng() % 7;
    auto map = ShardMap::Build(sizes, partition_bytes, servers);
    ASSERT_TRUE(map.ok());
    uint64_t largest = 0, total = 0;
    for (int t = 0; t < map->num_tensors(); ++t) {
      uint64_t covered = 0;
      for (const auto& c : map->partitions(t)) {
        EXPECT_EQ(c.offset, covered);
        EXPECT_GT(c.length, 0u);
        EXPECT_LE(c.length * 4, partition_bytes);
        EXPECT_GE(c.server, 0);
        EXPECT_LT(c.server, servers);
        covered += c.length;
        largest = std::max<uint64_t>(largest, c.length * 4);
      }
      EXPECT_EQ(covered, sizes[t]);
      total += covered * 4;
    }
    uint64_t lo = UINT64_MAX, hi = 0, sum = 0;
    for (int s = 0; s < servers; ++s) {
      lo = std::min(lo, map->server_bytes(s));
      hi = std::max(hi, map->server_bytes(s));
      sum += map->server_bytes(s);
    }
    EXPECT_EQ(sum, total);
    EXPECT_LE(hi - lo, largest) << "trial " << trial;
  }
}

TEST(ShardMapTest, Deterministic) {
  std::vector<uint64_t> sizes = {102764544, 4096, 16777216, 4096, 4096000, 1000, 34848, 96};
  auto a = ShardMap::Build(sizes, 1 << 20, 3);
  auto b = ShardMap::Build(sizes, 1 << 20, 3);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int t = 0; t < a->num_tensors(); ++t) {
    ASSERT_EQ(a->partitions(t).size(), b->partitions(t).size());
    for (size_t i = 0; i < a->partitions(t).size(); ++i)
      EXPECT_EQ(a->partitions(t)[i].server, b->partitions(t)[i].server);
  }
}

TEST(ShardMapTest, RejectsBadArguments) {
  auto m = ShardMap::Build({1}, 2, 1);
  EXPECT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("partition_bytes"), std::string::npos);
  m = ShardMap::Build({1}, 16, 0);
  EXPECT_NE(m.status().message().find("num_servers"), std::string::npos);
}

}  // namespace
}  // namespace nereus
