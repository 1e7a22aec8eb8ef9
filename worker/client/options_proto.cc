// The public API's names for its enums, and its plain structs to and from
// protobuf (options_proto.h).
#include "worker/client/options_proto.h"

#include <iterator>

#include "common/base/enum_names.h"

namespace nereus {

static_assert(static_cast<int>(SolverType::kSgd) == pb::SOLVER_SGD &&
                  static_cast<int>(SolverType::kNesterov) == pb::SOLVER_NESTEROV &&
                  static_cast<int>(SolverType::kAdaGrad) == pb::SOLVER_ADAGRAD &&
                  static_cast<int>(SolverType::kRmsProp) == pb::SOLVER_RMSPROP &&
                  static_cast<int>(SolverType::kAdaDelta) == pb::SOLVER_ADADELTA &&
                  static_cast<int>(SolverType::kAdam) == pb::SOLVER_ADAM &&
                  static_cast<int>(SolverType::kAverage) == pb::SOLVER_AVERAGE,
              "SolverType (nereus/options.h) must number the solvers as pb::SolverType does");

StatusOr<Schedule> ParseSchedule(const std::string& name) {
  if (name == "sequential") return Schedule::kSequential;
  if (name == "wfbp") return Schedule::kWfbp;
  if (name == "priority") return Schedule::kPriority;
  if (name == "full") return Schedule::kFull;
  return InvalidArgumentError("--schedule must be sequential, wfbp, priority or full, got \"" + name + "\"");
}

const char* ScheduleName(Schedule s) {
  static constexpr const char* kNames[] = {"sequential", "wfbp", "priority", "full"};
  static_assert(std::size(kNames) == static_cast<size_t>(Schedule::kFull) + 1, "a Schedule without a name");
  return NameOf(s, kNames);
}

const char* ConsistencyName(Consistency c) {
  static constexpr const char* kNames[] = {"BSP", "SSP", "ASYNC"};
  static_assert(std::size(kNames) == static_cast<size_t>(Consistency::kAsync) + 1, "a Consistency without a name");
  return NameOf(c, kNames);
}

pb::SgdConfig SgdConfigToProto(const SgdConfig& sgd) {
  pb::SgdConfig c;
  c.set_base_lr(sgd.base_lr);
  c.set_lr_policy(sgd.lr_policy);
  c.set_gamma(sgd.gamma);
  c.set_power(sgd.power);
  c.set_stepsize(sgd.stepsize);
  for (int v : sgd.stepvalue) c.add_stepvalue(v);
  c.set_max_iter(sgd.max_iter);
  c.set_momentum(sgd.momentum);
  c.set_weight_decay(sgd.weight_decay);
  c.set_regularization_type(sgd.regularization_type);
  c.set_type(static_cast<pb::SolverType>(sgd.type));
  c.set_delta(sgd.delta);
  c.set_momentum2(sgd.momentum2);
  c.set_rms_decay(sgd.rms_decay);
  return c;
}

SgdConfig SgdConfigFromProto(const pb::SgdConfig& c) {
  // Every field, in SgdConfig's order (public_api_test sets each to its own
  // value and round-trips it).
  return SgdConfig{c.base_lr(),
                   c.lr_policy(),
                   c.gamma(),
                   c.power(),
                   c.stepsize(),
                   std::vector<int>(c.stepvalue().begin(), c.stepvalue().end()),
                   c.max_iter(),
                   c.momentum(),
                   c.weight_decay(),
                   c.regularization_type(),
                   static_cast<SolverType>(c.type()),
                   c.delta(),
                   c.momentum2(),
                   c.rms_decay()};
}

JobInfo JobInfoFromProto(const pb::JobConfig& job) {
  Consistency consistency = Consistency::kBsp;  // The coordinator refuses a job without a consistency model.
  if (job.consistency() == pb::SSP) consistency = Consistency::kSsp;
  if (job.consistency() == pb::ASYNC) consistency = Consistency::kAsync;
  // Every field, in JobInfo's order (public_api_test sets each to its own value).
  return JobInfo{job.num_servers(),     job.num_workers(), consistency,       job.staleness(),
                 job.partition_bytes(), job.resume(),      job.start_clock(), job.checkpoint_every()};
}

}  // namespace nereus
