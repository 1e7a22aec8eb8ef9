// The public headers' plain types (nereus/status.h, nereus/options.h,
// nereus/client.h): their names, their conversion to and from the wire
// format at the one place it happens (worker/client/options_proto.h), and
// StatusOr's contract.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "common/update/sgd.h"
#include "nereus/client.h"
#include "worker/client/options_proto.h"

namespace nereus {
namespace {

using google::protobuf::util::MessageDifferencer;

TEST(PublicNamesTest, EveryValueHasItsName) {
  const std::vector<std::pair<StatusCode, const char*>> codes = {
      {StatusCode::kOk, "OK"},
      {StatusCode::kInvalidArgument, "INVALID_ARGUMENT"},
      {StatusCode::kNotFound, "NOT_FOUND"},
      {StatusCode::kFailedPrecondition, "FAILED_PRECONDITION"},
      {StatusCode::kUnavailable, "UNAVAILABLE"},
      {StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED"},
      {StatusCode::kAborted, "ABORTED"},
      {StatusCode::kDataLoss, "DATA_LOSS"},
      {StatusCode::kInternal, "INTERNAL"},
      {StatusCode::kRollback, "ROLLBACK"}};
  for (const auto& [code, name] : codes) EXPECT_STREQ(StatusCodeName(code), name);
  EXPECT_STREQ(StatusCodeName(static_cast<StatusCode>(99)), "UNKNOWN");
  EXPECT_EQ(Status(StatusCode::kDataLoss, "bad frame").ToString(), "DATA_LOSS: bad frame");

  for (Schedule s : {Schedule::kSequential, Schedule::kWfbp, Schedule::kPriority, Schedule::kFull}) {
    auto parsed = ParseSchedule(ScheduleName(s));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_STREQ(ScheduleName(Schedule::kWfbp), "wfbp");
  EXPECT_NE(ParseSchedule("fast").status().message().find("got \"fast\""), std::string::npos);

  for (SfbMode m : {SfbMode::kAuto, SfbMode::kOff, SfbMode::kOn}) EXPECT_EQ(*ParseSfbMode(SfbModeName(m)), m);
  EXPECT_STREQ(ConsistencyName(Consistency::kBsp), "BSP");
  EXPECT_STREQ(ConsistencyName(Consistency::kSsp), "SSP");
  EXPECT_STREQ(ConsistencyName(Consistency::kAsync), "ASYNC");
}

// Every field set, none to its default: a field the conversion forgot would
// come back as the default and show.
pb::SgdConfig EveryField() {
  pb::SgdConfig c;
  c.set_base_lr(0.25f);
  c.set_lr_policy("multistep");
  c.set_gamma(0.5f);
  c.set_power(0.75f);
  c.set_stepsize(7);
  c.add_stepvalue(10);
  c.add_stepvalue(20);
  c.set_max_iter(300);
  c.set_momentum(0.8f);
  c.set_weight_decay(0.004f);
  c.set_regularization_type("L1");
  c.set_type(pb::SOLVER_ADAM);
  c.set_delta(1e-6f);
  c.set_momentum2(0.99f);
  c.set_rms_decay(0.9f);
  return c;
}

TEST(SgdConfigTest, RoundTripsThroughThePlainStructFieldByField) {
  const pb::SgdConfig wire = EveryField();
  const SgdConfig plain = SgdConfigFromProto(wire);
  EXPECT_EQ(plain.base_lr, 0.25f);
  EXPECT_EQ(plain.lr_policy, "multistep");
  EXPECT_EQ(plain.stepvalue, (std::vector<int>{10, 20}));
  EXPECT_EQ(plain.regularization_type, "L1");
  EXPECT_EQ(plain.type, SolverType::kAdam);
  EXPECT_EQ(plain.momentum2, 0.99f);
  const pb::SgdConfig back = SgdConfigToProto(plain);
  EXPECT_TRUE(MessageDifferencer::Equals(back, wire)) << back.DebugString();
  // Bitwise the same bytes: every worker's settings are compared by digest.
  EXPECT_EQ(back.SerializeAsString(), wire.SerializeAsString());
  for (pb::SolverType t : {pb::SOLVER_SGD, pb::SOLVER_NESTEROV, pb::SOLVER_ADAGRAD, pb::SOLVER_RMSPROP,
                           pb::SOLVER_ADADELTA, pb::SOLVER_ADAM}) {
    pb::SgdConfig c = wire;
    c.set_type(t);
    EXPECT_EQ(SgdConfigToProto(SgdConfigFromProto(c)).type(), t);
  }
}

TEST(SgdConfigTest, DefaultsAreCaffesAndValid) {
  const pb::SgdConfig c = SgdConfigToProto(SgdConfig());
  EXPECT_EQ(c.lr_policy(), "fixed");
  EXPECT_EQ(c.regularization_type(), "L2");
  EXPECT_EQ(c.type(), pb::SOLVER_SGD);
  EXPECT_EQ(c.delta(), 1e-8f);
  EXPECT_EQ(c.momentum2(), 0.999f);
  EXPECT_EQ(c.rms_decay(), 0.99f);
  EXPECT_TRUE(ValidateSgdConfig(c).ok()) << ValidateSgdConfig(c);
}

TEST(JobInfoTest, CarriesTheJobConfigWithPartitionsByTheirName) {
  pb::JobConfig job;
  job.set_num_servers(3);
  job.set_num_workers(5);
  job.set_consistency(pb::SSP);
  job.set_staleness(2);
  job.set_partition_bytes(4096);
  job.set_resume(true);
  job.set_start_clock(40);
  job.set_checkpoint_every(20);
  const JobInfo info = JobInfoFromProto(job);
  EXPECT_EQ(info.num_servers, 3);
  EXPECT_EQ(info.num_workers, 5);
  EXPECT_EQ(info.consistency, Consistency::kSsp);
  EXPECT_EQ(info.staleness, 2);
  EXPECT_EQ(info.partition_bytes, 4096u);
  EXPECT_TRUE(info.resume);
  EXPECT_EQ(info.start_clock, 40);
  EXPECT_EQ(info.checkpoint_every, 20);
  job.set_consistency(pb::ASYNC);
  EXPECT_EQ(JobInfoFromProto(job).consistency, Consistency::kAsync);
  job.set_consistency(pb::BSP);
  EXPECT_EQ(JobInfoFromProto(job).consistency, Consistency::kBsp);
}

TEST(StatusOrDeathTest, ReadingTheValueOfAnErrorStopsTheProcessNamingTheError) {
  StatusOr<int> error = NotFoundError("tensor \"fc9\"");
  EXPECT_DEATH((void)error.value(), "the value of a StatusOr that holds an error was read: NOT_FOUND: tensor \"fc9\"");
  EXPECT_DEATH(StatusOr<int>{Status::OK()}, "StatusOr built from an OK status without a value");
  StatusOr<int> value = 7;
  EXPECT_EQ(*value, 7);
}

}  // namespace
}  // namespace nereus
