// Tile: exact values (forward, and backward's sum over the tiles), numeric
// gradients on several axes, and configuration errors.
#include "worker/trainer/layers/tile_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace test {
namespace {

TEST(TileLayerTest, ForwardCopiesTheBlockFromTheAxisOn) {
  // [2, 3] tiled 2 times along axis 1: each row twice over.
  ExpectLayerForward<TileLayer>("name: 't' type: 'Tile' tile_param { tiles: 2 }", {2, 3}, {1, 2, 3, 4, 5, 6}, {2, 6},
                                {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6});
  // Along axis 0: the whole blob, 3 times.
  ExpectLayerForward<TileLayer>("name: 't' type: 'Tile' tile_param { axis: 0 tiles: 3 }", {2, 1}, {7, 8}, {6, 1},
                                {7, 8, 7, 8, 7, 8});
  // Along the last axis (-1): each row of 2, twice.
  ExpectLayerForward<TileLayer>("name: 't' type: 'Tile' tile_param { axis: -1 tiles: 2 }", {2, 2}, {1, 2, 3, 4}, {2, 4},
                                {1, 2, 1, 2, 3, 4, 3, 4});
}

TEST(TileLayerTest, BackwardAddsTheTiles) {
  Blob bottom(std::vector<int>{2, 2}), top;
  SetBlobData(&bottom, {1, 2, 3, 4});
  TileLayer layer(ParseLayerParameter("name: 't' type: 'Tile' tile_param { tiles: 3 }"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  ASSERT_EQ((std::vector<int>{2, 6}), top.shape());
  for (int i = 0; i < 12; ++i) top.mutable_cpu_diff()[i] = static_cast<float>(i);
  layer.Backward({&top}, {true}, {&bottom});
  // Row 0's tiles: (0, 1), (2, 3), (4, 5); row 1's: (6, 7), (8, 9), (10, 11).
  EXPECT_EQ((std::vector<float>{0 + 2 + 4, 1 + 3 + 5, 6 + 8 + 10, 7 + 9 + 11}), BlobDiff(bottom));
}

TEST(TileLayerTest, Gradients) {
  for (const char* param : {"tiles: 3", "axis: 0 tiles: 2", "axis: 2 tiles: 3", "axis: -1 tiles: 2"}) {
    SCOPED_TRACE(param);
    ExpectLayerGradient<TileLayer>(std::string("name: 't' type: 'Tile' tile_param { ") + param + " }", {2, 3, 2, 2},
                                   11);
  }
}

TEST(TileLayerTest, BadParametersAreErrors) {
  TileLayer no_tiles(ParseLayerParameter("name: 't' type: 'Tile'"));
  ExpectErrorContains(SetUpOn(&no_tiles, {{2, 3}}), {"layer t (Tile)", "tiles must be given"});
  TileLayer zero(ParseLayerParameter("name: 't' type: 'Tile' tile_param { tiles: 0 }"));
  ExpectErrorContains(SetUpOn(&zero, {{2, 3}}), {"layer t (Tile)", "tiles must be positive, got 0"});
  TileLayer axis(ParseLayerParameter("name: 't' type: 'Tile' tile_param { axis: 2 tiles: 2 }"));
  ExpectErrorContains(SetUpOn(&axis, {{2, 3}}), {"layer t (Tile)", "axis 2 is out of range", "2 3"});
}

}  // namespace
}  // namespace test
}  // namespace nereus
