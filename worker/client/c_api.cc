// The C interface (nereus/c_api.h) over the C++ client: opaque structs that
// hold the C++ objects, the status of each call turned into a code and the
// calling thread's last-error text. No state outside the handles but that
// thread-local text.
#include "nereus/c_api.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/base/clock.h"
#include "common/update/sgd.h"
#include "nereus/client.h"
#include "nereus/options.h"
#include "worker/client/client_internal.h"

struct nereus_options_t {
  nereus::ClientOptions options;
};

struct nereus_solver_t {
  nereus::SgdConfig sgd;
};

struct nereus_tensor_t {
  nereus::TensorSpec spec;
};

struct nereus_client_t {
  std::unique_ptr<nereus::Client> client;
};

struct nereus_handle_t {
  const nereus::Client* client;  // For what a timed-out wait names; the handle may outlive it (then not read).
  nereus::Handle handle;
  std::string what;  // "PULL of tensor \"w\" for clock 3".
};

namespace {

using nereus::Status;
using nereus::StatusCode;

// The calling thread's last failure (nereus_last_error).
thread_local std::string t_last_error;

int Fail(StatusCode code, std::string message) {
  t_last_error = std::move(message);
  return static_cast<int>(code);
}

int Report(const Status& st) {
  if (st.ok()) return NEREUS_OK;
  return Fail(st.code(), st.message());
}

int NullArgument(const char* function, const char* what) {
  return Fail(StatusCode::kInvalidArgument, std::string(function) + ": " + what + " is NULL");
}

// Whole-string parses; false when the text is not one value.
bool ParseInt64(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

bool ParseDouble(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

bool ParseBool(const std::string& text, bool* out) {
  if (text == "true" || text == "1") {
    *out = true;
  } else if (text == "false" || text == "0") {
    *out = false;
  } else {
    return false;
  }
  return true;
}

// One settable field: parses the text into the object, or says what it
// expected.
template <class T>
struct Field {
  const char* expected;  // "an integer", ...
  std::function<bool(const std::string&, T*)> set;
};

template <class T, class V>
Field<T> IntField(V T::*member, int64_t low, int64_t high) {
  return {"an integer", [member, low, high](const std::string& s, T* o) {
            int64_t v = 0;
            if (!ParseInt64(s, &v) || v < low || v > high) return false;
            o->*member = static_cast<V>(v);
            return true;
          }};
}

template <class T, class V>
Field<T> NumberField(V T::*member) {
  return {"a number", [member](const std::string& s, T* o) {
            double v = 0;
            if (!ParseDouble(s, &v)) return false;
            o->*member = static_cast<V>(v);
            return true;
          }};
}

template <class T>
Field<T> TextField(std::string T::*member) {
  return {"text", [member](const std::string& s, T* o) {
            o->*member = s;
            return true;
          }};
}

template <class T>
Field<T> BoolField(bool T::*member) {
  return {"true or false", [member](const std::string& s, T* o) { return ParseBool(s, &(o->*member)); }};
}

// A field of an enum that `parse` (text -> StatusOr of the value) reads.
template <class T, class V, class Parse>
Field<T> ParsedField(const char* expected, V T::*member, Parse parse) {
  return {expected, [member, parse](const std::string& s, T* o) {
            auto v = parse(s);
            if (v.ok()) o->*member = *v;
            return v.ok();
          }};
}

// The tables are built per call (options are set a few times per process):
// no static state.
std::map<std::string, Field<nereus::ClientOptions>> OptionFields() {
  using O = nereus::ClientOptions;
  return {
      {"coordinator", TextField(&O::coordinator)},
      {"rank", IntField(&O::rank, -1, INT32_MAX)},
      {"bind_host", TextField(&O::bind_host)},
      {"curve_dir", TextField(&O::curve_dir)},
      {"startup_timeout_s", IntField(&O::startup_timeout_s, 1, INT32_MAX)},
      {"wait_timeout_ms", IntField(&O::wait_timeout_ms, 0, INT64_MAX)},
      {"io_threads", IntField(&O::io_threads, 1, 64)},
      {"streams", IntField(&O::streams, 1, 64)},
      {"schedule", ParsedField("sequential, wfbp, priority or full", &O::schedule, nereus::ParseSchedule)},
      {"credit_bytes", IntField(&O::credit_bytes, 0, INT64_MAX)},
      {"batch_bytes", IntField(&O::batch_bytes, 0, INT64_MAX)},
      {"merge", BoolField(&O::merge)},
      {"merge_alpha_s", NumberField(&O::merge_alpha_s)},
      {"merge_beta_s_per_byte", NumberField(&O::merge_beta_s_per_byte)},
      {"merge_profile_iterations", IntField(&O::merge_profile_iterations, 0, INT32_MAX)},
      {"timeline", TextField(&O::timeline)},
      {"timeline_every", IntField(&O::timeline_every, 1, INT32_MAX)},
      {"resume", BoolField(&O::resume)},
      {"sfb", ParsedField("auto, on or off", &O::sfb, nereus::ParseSfbMode)},
      {"sfb_rebuild_gflops", NumberField(&O::sfb_rebuild_gflops)},
      {"sfb_update_gbytes", NumberField(&O::sfb_update_gbytes)},
      {"sfb_apply_gbytes", NumberField(&O::sfb_apply_gbytes)},
      {"sfb_link_gbit", NumberField(&O::sfb_link_gbit)},
      {"sfb_trial_clocks", IntField(&O::sfb_trial_clocks, 0, INT32_MAX)},
      {"sfb_trial_trust_ratio", NumberField(&O::sfb_trial_trust_ratio)},
      {"sfb_schedule", TextField(&O::sfb_schedule)},
  };
}

bool ParseSolverType(const std::string& s, nereus::SolverType* out) {
  if (s == "Average") {
    *out = nereus::SolverType::kAverage;
    return true;
  }
  auto type = nereus::SolverTypeFromName(s);
  if (!type.ok()) return false;
  *out = static_cast<nereus::SolverType>(*type);
  return true;
}

std::map<std::string, Field<nereus::SgdConfig>> SolverFields() {
  using S = nereus::SgdConfig;
  return {
      {"type",
       {"SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam or Average",
        [](const std::string& s, S* o) { return ParseSolverType(s, &o->type); }}},
      {"base_lr", NumberField(&S::base_lr)},
      {"lr_policy", TextField(&S::lr_policy)},
      {"gamma", NumberField(&S::gamma)},
      {"power", NumberField(&S::power)},
      {"stepsize", IntField(&S::stepsize, 0, INT32_MAX)},
      {"stepvalue",
       {"comma-separated integers",
        [](const std::string& s, S* o) {
          std::vector<int> values;
          size_t start = 0;
          while (start <= s.size() && !s.empty()) {
            const size_t comma = s.find(',', start);
            int64_t v = 0;
            if (!ParseInt64(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start), &v) ||
                v < 0 || v > INT32_MAX)
              return false;
            values.push_back(static_cast<int>(v));
            if (comma == std::string::npos) break;
            start = comma + 1;
          }
          o->stepvalue = values;
          return true;
        }}},
      {"max_iter", IntField(&S::max_iter, 0, INT32_MAX)},
      {"momentum", NumberField(&S::momentum)},
      {"weight_decay", NumberField(&S::weight_decay)},
      {"regularization_type", TextField(&S::regularization_type)},
      {"delta", NumberField(&S::delta)},
      {"momentum2", NumberField(&S::momentum2)},
      {"rms_decay", NumberField(&S::rms_decay)},
  };
}

template <class T>
int SetField(const char* function, const std::map<std::string, Field<T>>& fields, T* object, const char* name,
             const char* value) {
  if (object == nullptr) return NullArgument(function, "the object");
  if (name == nullptr || value == nullptr) return NullArgument(function, "the name or the value");
  auto it = fields.find(name);
  if (it == fields.end()) {
    std::string known;
    for (const auto& [n, f] : fields) known += (known.empty() ? "" : ", ") + n;
    return Fail(StatusCode::kInvalidArgument,
                std::string(function) + ": unknown name \"" + name + "\" (known: " + known + ")");
  }
  T copy = *object;
  if (!it->second.set(value, &copy))
    return Fail(StatusCode::kInvalidArgument,
                std::string(function) + ": " + name + " must be " + it->second.expected + ", got \"" + value + "\"");
  *object = std::move(copy);
  return NEREUS_OK;
}

}  // namespace

extern "C" {

int nereus_c_api_version(void) { return NEREUS_C_API_VERSION; }

const char* nereus_last_error(void) { return t_last_error.c_str(); }

const char* nereus_status_name(int code) {
  if (code < 0 || code > static_cast<int>(StatusCode::kRollback)) return "UNKNOWN";
  return nereus::StatusCodeName(static_cast<StatusCode>(code));
}

nereus_options_t* nereus_options_create(void) { return new nereus_options_t(); }
void nereus_options_destroy(nereus_options_t* options) { delete options; }
int nereus_options_set(nereus_options_t* options, const char* name, const char* value) {
  return SetField("nereus_options_set", OptionFields(), options ? &options->options : nullptr, name, value);
}

nereus_solver_t* nereus_solver_create(void) { return new nereus_solver_t(); }
void nereus_solver_destroy(nereus_solver_t* solver) { delete solver; }
int nereus_solver_set(nereus_solver_t* solver, const char* name, const char* value) {
  return SetField("nereus_solver_set", SolverFields(), solver ? &solver->sgd : nullptr, name, value);
}

int nereus_connect(const nereus_options_t* options, nereus_client_t** out) {
  if (out == nullptr) return NullArgument("nereus_connect", "out");
  *out = nullptr;
  if (options == nullptr) return NullArgument("nereus_connect", "options");
  auto client = nereus::Client::Connect(options->options);
  if (!client.ok()) return Report(client.status());
  *out = new nereus_client_t{std::move(client).value()};
  return NEREUS_OK;
}

void nereus_client_destroy(nereus_client_t* client) { delete client; }

int nereus_rank(const nereus_client_t* client) { return client->client->rank(); }
int nereus_num_workers(const nereus_client_t* client) { return client->client->num_workers(); }
int nereus_num_servers(const nereus_client_t* client) { return client->client->num_servers(); }
int nereus_consistency(const nereus_client_t* client) { return static_cast<int>(client->client->job().consistency); }
int nereus_staleness(const nereus_client_t* client) { return client->client->job().staleness; }
int64_t nereus_start_clock(const nereus_client_t* client) { return client->client->job().start_clock; }

nereus_tensor_t* nereus_tensor_create(const char* name, const int64_t* shape, size_t ndim) {
  auto* t = new nereus_tensor_t();
  if (name != nullptr) t->spec.name = name;
  if (shape != nullptr) t->spec.shape.assign(shape, shape + ndim);
  return t;
}
void nereus_tensor_destroy(nereus_tensor_t* tensor) { delete tensor; }
void nereus_tensor_set_mults(nereus_tensor_t* tensor, float lr_mult, float decay_mult) {
  tensor->spec.lr_mult = lr_mult;
  tensor->spec.decay_mult = decay_mult;
}
void nereus_tensor_set_layer(nereus_tensor_t* tensor, int layer, float* data, const float* diff) {
  tensor->spec.layer = layer;
  tensor->spec.data = data;
  tensor->spec.diff = diff;
}
void nereus_tensor_set_factors(nereus_tensor_t* tensor, int64_t factor_rows, const float* left, const float* right) {
  tensor->spec.factor_rows = factor_rows;
  tensor->spec.factor_left = left;
  tensor->spec.factor_right = right;
}

int nereus_register_tensor(nereus_client_t* client, const nereus_tensor_t* tensor, int* id) {
  if (client == nullptr || tensor == nullptr || id == nullptr)
    return NullArgument("nereus_register_tensor", "the client, the tensor or id");
  if (tensor->spec.name.empty())
    return Fail(StatusCode::kInvalidArgument, "nereus_register_tensor: a tensor needs a name");
  auto registered = client->client->RegisterTensor(tensor->spec);
  if (!registered.ok()) return Report(registered.status());
  *id = *registered;
  return NEREUS_OK;
}

int nereus_init(nereus_client_t* client, const nereus_solver_t* solver, const float* const* initial_values,
                size_t num_tensors) {
  if (client == nullptr || solver == nullptr) return NullArgument("nereus_init", "the client or the solver");
  if (initial_values == nullptr && num_tensors > 0) return NullArgument("nereus_init", "initial_values");
  std::vector<const float*> initial(initial_values, initial_values + num_tensors);
  for (size_t t = 0; t < num_tensors; ++t)
    if (initial[t] == nullptr)
      return Fail(StatusCode::kInvalidArgument, "nereus_init: initial_values[" + std::to_string(t) + "] is NULL");
  return Report(client->client->Init(solver->sgd, initial));
}

int nereus_sfb_tensors(const nereus_client_t* client, int* ids, size_t capacity, size_t* count) {
  if (client == nullptr || count == nullptr) return NullArgument("nereus_sfb_tensors", "the client or count");
  const std::vector<int> sfb = client->client->sfb_tensors();
  *count = sfb.size();
  for (size_t i = 0; i < sfb.size() && i < capacity && ids != nullptr; ++i) ids[i] = sfb[i];
  return NEREUS_OK;
}

int nereus_sfb_at(const nereus_client_t* client, int tensor, int64_t clock, int* out) {
  if (client == nullptr || out == nullptr) return NullArgument("nereus_sfb_at", "the client or out");
  *out = client->client->SfbAt(tensor, clock) ? 1 : 0;
  return NEREUS_OK;
}

int nereus_push(nereus_client_t* client, int tensor, const float* grad, int64_t clock, nereus_handle_t** out) {
  if (out == nullptr) return NullArgument("nereus_push", "out");
  *out = nullptr;
  if (client == nullptr || grad == nullptr) return NullArgument("nereus_push", "the client or grad");
  *out = new nereus_handle_t{client->client.get(), client->client->Push(tensor, grad, clock),
                             "PUSH of tensor " + std::to_string(tensor) + " for clock " + std::to_string(clock)};
  return NEREUS_OK;
}

int nereus_pull(nereus_client_t* client, int tensor, float* dst, int64_t clock, nereus_handle_t** out) {
  if (out == nullptr) return NullArgument("nereus_pull", "out");
  *out = nullptr;
  if (client == nullptr || dst == nullptr) return NullArgument("nereus_pull", "the client or dst");
  *out = new nereus_handle_t{client->client.get(), client->client->Pull(tensor, dst, clock),
                             "PULL of tensor " + std::to_string(tensor) + " for clock " + std::to_string(clock)};
  return NEREUS_OK;
}

int nereus_handle_wait(nereus_handle_t* handle, int64_t timeout_ms) {
  if (handle == nullptr) return NullArgument("nereus_handle_wait", "the handle");
  if (timeout_ms < 0) return Report(handle->handle.Wait());
  Status st;
  if (handle->handle.WaitFor(std::chrono::milliseconds(timeout_ms), &st)) return Report(st);
  return Fail(StatusCode::kDeadlineExceeded, handle->what + " not done after " + std::to_string(timeout_ms) +
                                                 " ms, still waiting for " +
                                                 nereus::DescribeAwaited(*handle->client, handle->handle));
}

int nereus_handle_done(const nereus_handle_t* handle) { return handle->handle.done() ? 1 : 0; }
int64_t nereus_handle_version(const nereus_handle_t* handle) { return handle->handle.version(); }
void nereus_handle_destroy(nereus_handle_t* handle) { delete handle; }

int nereus_gradients_ready(nereus_client_t* client, int layer, int64_t clock) {
  if (client == nullptr) return NullArgument("nereus_gradients_ready", "the client");
  return Report(client->client->GradientsReady(layer, clock));
}

int nereus_wait_weights(nereus_client_t* client, int layer, int64_t clock) {
  if (client == nullptr) return NullArgument("nereus_wait_weights", "the client");
  return Report(client->client->WaitWeights(layer, clock));
}

int nereus_barrier(nereus_client_t* client, const char* name) {
  if (client == nullptr || name == nullptr) return NullArgument("nereus_barrier", "the client or the name");
  return Report(client->client->Barrier(name));
}

int nereus_broadcast(nereus_client_t* client, const char* name, float* values, size_t n, int root) {
  if (client == nullptr || name == nullptr) return NullArgument("nereus_broadcast", "the client or the name");
  if (values == nullptr && n > 0) return NullArgument("nereus_broadcast", "values");
  return Report(client->client->Broadcast(name, values, n, root));
}

int nereus_stat(const nereus_client_t* client, const char* name, uint64_t* value) {
  if (client == nullptr || name == nullptr || value == nullptr)
    return NullArgument("nereus_stat", "the client, the name or value");
  const nereus::ClientStats s = client->client->stats();
  const std::map<std::string, uint64_t> counters = {
      {"push_messages", s.push_messages},
      {"push_bytes", s.push_bytes},
      {"pull_messages", s.pull_messages},
      {"pull_bytes", s.pull_bytes},
      {"factor_messages", s.factor_messages},
      {"factor_bytes", s.factor_bytes},
      {"factor_bytes_received", s.factor_bytes_received},
      {"factor_apply_us", s.factor_apply_us},
      {"batches", s.batches},
      {"batched_units", s.batched_units},
      {"host_push_messages", s.host_push_messages},
      {"host_push_bytes", s.host_push_bytes},
      {"host_summed_bytes", s.host_summed_bytes},
      {"host_relayed_bytes", s.host_relayed_bytes},
  };
  auto it = counters.find(name);
  if (it == counters.end())
    return Fail(StatusCode::kInvalidArgument, std::string("nereus_stat: unknown counter \"") + name + "\"");
  *value = it->second;
  return NEREUS_OK;
}

int64_t nereus_monotonic_us(void) { return nereus::MonotonicMicros(); }

void nereus_trace_span(nereus_client_t* client, const char* name, int64_t clock, int64_t begin_us, int64_t end_us,
                       int lane) {
  if (client == nullptr || name == nullptr) return;
  const nereus::TraceLane l = lane == 1   ? nereus::TraceLane::kDeviceToHost
                              : lane == 2 ? nereus::TraceLane::kHostToDevice
                                          : nereus::TraceLane::kCompute;
  client->client->TraceSpan(name, clock, begin_us, end_us, l);
}

int nereus_finish(nereus_client_t* client) {
  if (client == nullptr) return NullArgument("nereus_finish", "the client");
  return Report(client->client->Finish());
}

int nereus_fail(nereus_client_t* client, const char* message) {
  if (client == nullptr) return NullArgument("nereus_fail", "the client");
  if (message == nullptr) return NullArgument("nereus_fail", "the message");
  client->client->Fail(nereus::AbortedError(message));
  return NEREUS_OK;
}

}  // extern "C"
