/* The Nereus worker client as a C interface: what a trainer in another
 * language (Python through ctypes: worker/torch/, nereus.torch) links to
 * keep its parameters on the parameter servers, without compiling against
 * C++ or the trainer's framework. It is the C++ client (nereus/client.h) one
 * to one; that header and docs/CLIENT.md explain the words (clock, layer,
 * partition, sufficient factors) and the behaviour; docs/TORCH.md the
 * Python package over this.
 *
 * Library: libnereus_c.so (build/lib, installed beside the headers'
 * library folder); it exports only the nereus_* functions below.
 *
 * Conventions:
 *  - Objects are opaque handles made by a *_create or nereus_connect and
 *    freed by the matching *_destroy, exactly once. Destroying NULL is a
 *    no-op.
 *  - Functions that can fail return an int status: NEREUS_OK (0) or one of
 *    the codes below (nereus::StatusCode's values). The text of the last
 *    failure on the calling thread is nereus_last_error(); it stays valid
 *    until the next nereus_* call on that thread. A function that returns
 *    NEREUS_OK leaves the text as it was.
 *  - Strings passed in are copied; the caller keeps ownership. Buffers
 *    passed in (weights, gradients, factors) are NOT copied where a function
 *    says so: they must then stay valid for as long as it says.
 *  - Thread safety: every function taking a nereus_client_t* may be called
 *    from any thread, concurrently, except nereus_client_destroy (no other
 *    call on that client may run or follow). An options or solver object
 *    must not be used by two threads at once. A handle may be waited on from
 *    any thread; destroy it once nothing waits on it.
 *  - Blocking: said per function. Nothing here busy-waits; blocking calls
 *    release no locks of the caller's (ctypes releases Python's GIL).
 *
 * Part of Nereus's public API: includes only the C standard library.
 */
#ifndef NEREUS_C_API_H_
#define NEREUS_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The interface's version: one more at every incompatible change. */
#define NEREUS_C_API_VERSION 1
int nereus_c_api_version(void);

/* Status codes (nereus::StatusCode). */
#define NEREUS_OK 0
#define NEREUS_INVALID_ARGUMENT 1
#define NEREUS_NOT_FOUND 2
#define NEREUS_FAILED_PRECONDITION 3
#define NEREUS_UNAVAILABLE 4       /* A peer is dead or unreachable. */
#define NEREUS_DEADLINE_EXCEEDED 5 /* A bounded wait ran out; the text names what was awaited. */
#define NEREUS_ABORTED 6           /* The job was aborted; the text names the node that failed. */
#define NEREUS_DATA_LOSS 7
#define NEREUS_INTERNAL 8
#define NEREUS_RESOURCE_EXHAUSTED 9
#define NEREUS_ROLLBACK 10

/* The text of the calling thread's last failure ("" if none yet). Owned by
 * the library, valid until the next nereus_* call on this thread. */
const char* nereus_last_error(void);
/* "OK", "INVALID_ARGUMENT", ...; a static string ("UNKNOWN" for other codes). */
const char* nereus_status_name(int code);

/* --- Options: how a client joins the job (nereus::ClientOptions) -------- */

typedef struct nereus_options_t nereus_options_t;

/* The defaults of nereus::ClientOptions. Never NULL. */
nereus_options_t* nereus_options_create(void);
void nereus_options_destroy(nereus_options_t* options);
/* Sets one field by the name of its nereus_worker flag (docs/CLIENT.md),
 * the value as text: coordinator, rank, bind_host, curve_dir,
 * startup_timeout_s, wait_timeout_ms, io_threads, streams, schedule
 * (sequential|wfbp|priority|full), credit_bytes, batch_bytes, merge
 * (true|false), merge_alpha_s, merge_beta_s_per_byte,
 * merge_profile_iterations, timeline, timeline_every, resume, sfb
 * (auto|on|off), sfb_rebuild_gflops, sfb_update_gbytes, sfb_apply_gbytes,
 * sfb_link_gbit, sfb_trial_clocks, sfb_trial_trust_ratio, sfb_schedule. NEREUS_INVALID_ARGUMENT for an unknown name or
 * a value that does not parse whole; the options are then unchanged. */
int nereus_options_set(nereus_options_t* options, const char* name, const char* value);

/* --- Solver: what the servers apply (nereus::SgdConfig) ------------------ */

typedef struct nereus_solver_t nereus_solver_t;

/* Caffe's defaults (base_lr 0, fixed policy, SGD). Never NULL. */
nereus_solver_t* nereus_solver_create(void);
void nereus_solver_destroy(nereus_solver_t* solver);
/* Sets one field by its Caffe name: type (SGD, Nesterov, AdaGrad, RMSProp,
 * AdaDelta, Adam, or Average: the servers keep the workers' average
 * gradient, BSP only), base_lr, lr_policy, gamma, power, stepsize,
 * stepvalue (comma-separated), max_iter, momentum, weight_decay,
 * regularization_type (L2|L1), delta, momentum2, rms_decay. Errors as
 * nereus_options_set. The settings are checked at nereus_init. */
int nereus_solver_set(nereus_solver_t* solver, const char* name, const char* value);

/* --- The client ---------------------------------------------------------- */

typedef struct nereus_client_t nereus_client_t;

/* Registers with the coordinator and blocks until every server and worker
 * of the job has joined (or startup_timeout_s passes). On NEREUS_OK *out is
 * a new client; otherwise *out is NULL. */
int nereus_connect(const nereus_options_t* options, nereus_client_t** out);
/* Fails every outstanding handle and leaves the job (without
 * nereus_finish or nereus_fail, the rest of the job sees this worker as
 * dead once it has been silent for heartbeat_timeout_ms). Buffers the
 * client was given may be freed once it returns. Blocks while the client's
 * threads stop. */
void nereus_client_destroy(nereus_client_t* client);

/* The job (set at connect, then constant). consistency: 0 BSP, 1 SSP,
 * 2 async. start_clock: the clock a resumed job continues from, else 0. */
int nereus_rank(const nereus_client_t* client);
int nereus_num_workers(const nereus_client_t* client);
int nereus_num_servers(const nereus_client_t* client);
int nereus_consistency(const nereus_client_t* client);
int nereus_staleness(const nereus_client_t* client);
int64_t nereus_start_clock(const nereus_client_t* client);

/* --- Tensors (nereus::TensorSpec) ----------------------------------------- */

typedef struct nereus_tensor_t nereus_tensor_t;

/* A tensor's description: `name` and `ndim` sizes in `shape` (both copied),
 * lr_mult and decay_mult 1, no layer, no factors. Never NULL. Checked at
 * nereus_register_tensor. */
nereus_tensor_t* nereus_tensor_create(const char* name, const int64_t* shape, size_t ndim);
void nereus_tensor_destroy(nereus_tensor_t* tensor);
/* The solver's per-tensor multipliers of the learning rate and the decay. */
void nereus_tensor_set_mults(nereus_tensor_t* tensor, float lr_mult, float decay_mult);
/* For the layer-wise calls: the layer (>= 0, 0 nearest the input), where the
 * weights live (written by nereus_wait_weights) and where the gradients are
 * read (after nereus_gradients_ready). Both hold the tensor's element count
 * and must stay valid until nereus_client_destroy returns. Every tensor of a
 * client has them, or none does (then push and pull only). */
void nereus_tensor_set_layer(nereus_tensor_t* tensor, int layer, float* data, const float* diff);
/* Sufficient factors of a 2-D rows x cols weight (a fully connected
 * layer's): each clock's gradient is left^T * right, with left = factor_rows
 * x rows and right = factor_rows x cols, row-major. The buffers must hold
 * the clock's factors when nereus_gradients_ready is called for the
 * tensor's layer (they are copied then) and stay valid until
 * nereus_client_destroy returns. HybComm decides at nereus_init whether the
 * tensor travels as factors (option sfb). */
void nereus_tensor_set_factors(nereus_tensor_t* tensor, int64_t factor_rows, const float* left, const float* right);

/* Declares `tensor` (read during the call only); *id is its id, 0, 1, ...
 * in call order. Every worker registers the same tensors in the same order
 * (checked at nereus_init). Only before nereus_init. */
int nereus_register_tensor(nereus_client_t* client, const nereus_tensor_t* tensor, int* id);

/* Worker 0 sends initial_values[t] (num_tensors pointers, one per
 * registered tensor, each of its element count; read during the call only)
 * and the solver settings to the servers; every worker then waits until all
 * are initialized (other workers' values are ignored). Tensors registered
 * with layers then have clock 0's weights requested. Blocking. */
int nereus_init(nereus_client_t* client, const nereus_solver_t* solver, const float* const* initial_values,
                size_t num_tensors);
/* After init: the ids of the tensors that travel as sufficient factors, in
 * id order. Writes at most `capacity` ids and sets *count to how many there
 * are. */
int nereus_sfb_tensors(const nereus_client_t* client, int* ids, size_t capacity, size_t* count);
/* Whether tensor `tensor`'s gradient of `clock` travels as sufficient
 * factors (*out 1) or through the servers (*out 0): HybComm may switch a
 * tensor's path at a clock boundary (option sfb=auto measures both paths,
 * sfb_schedule forces switches). Final once nereus_wait_weights of clock - 1
 * (any layer) has returned, so a trainer asks before handing the clock's
 * gradients over: one that travels as factors needs its factors, and its
 * gradient buffer is not read. *out is 0 for a tensor without factors (and
 * for an id that names no tensor). Thread-safe. */
int nereus_sfb_at(const nereus_client_t* client, int tensor, int64_t clock, int* out);

/* --- Asynchronous push and pull ------------------------------------------ */

typedef struct nereus_handle_t nereus_handle_t;

/* Sends tensor `tensor`'s gradient for `clock`; returns at once with *out a
 * new handle (also when the push failed at once: the handle then holds the
 * error). `grad` must stay valid and unchanged until the handle is done
 * (sent without copying); if the handle fails, until nereus_client_destroy
 * returns. */
int nereus_push(nereus_client_t* client, int tensor, const float* grad, int64_t clock, nereus_handle_t** out);
/* Fetches tensor `tensor`'s weights for `clock` into `dst` (its element
 * count); returns at once with *out a new handle. `dst` must stay valid
 * until the handle is done. */
int nereus_pull(nereus_client_t* client, int tensor, float* dst, int64_t clock, nereus_handle_t** out);
/* Blocks until the operation is done and returns its outcome; timeout_ms
 * >= 0 bounds the wait: NEREUS_DEADLINE_EXCEEDED naming the operation, its
 * tensor and clock (the handle stays valid and may be waited on again). */
int nereus_handle_wait(nereus_handle_t* handle, int64_t timeout_ms);
/* 1 once done, else 0. Does not block. */
int nereus_handle_done(const nereus_handle_t* handle);
/* Pull: the number of updates in the weights received. Valid once done. */
int64_t nereus_handle_version(const nereus_handle_t* handle);
/* A handle may be destroyed before it is done; its buffers' rules stay. */
void nereus_handle_destroy(nereus_handle_t* handle);

/* --- The layer-wise calls (tensors registered with layer, data, diff) ----- */

/* Hands layer `layer`'s gradients (and factors) for `clock` over and returns
 * at once; the layer's weights for clock + 1 are requested with them. The
 * diff buffers must not change until nereus_wait_weights(layer, clock + 1)
 * returns. A layer without tensors is a no-op. */
int nereus_gradients_ready(nereus_client_t* client, int layer, int64_t clock);
/* Blocks until layer `layer`'s weights for `clock` are in its data buffers.
 * Bounded by the wait_timeout_ms option when set: NEREUS_DEADLINE_EXCEEDED
 * naming the layer's tensors awaited, the clock, and each server (or, for
 * sufficient factors, worker) that has not answered. */
int nereus_wait_weights(nereus_client_t* client, int layer, int64_t clock);

/* --- Job-wide --------------------------------------------------------------- */

/* Blocks until every worker has entered barrier `name`. */
int nereus_barrier(nereus_client_t* client, const char* name);
/* Every worker calls it with the same name and n; blocks until all have;
 * then values[0..n) holds worker `root`'s values everywhere. Through the
 * coordinator: for small state (a model's buffers), not for weights. */
int nereus_broadcast(nereus_client_t* client, const char* name, float* values, size_t n, int root);
/* A counter of nereus::ClientStats by its field name (push_messages,
 * push_bytes, pull_messages, pull_bytes, factor_messages, factor_bytes,
 * factor_bytes_received, factor_apply_us, batches, batched_units,
 * host_push_messages, host_push_bytes, host_summed_bytes,
 * host_relayed_bytes). */
int nereus_stat(const nereus_client_t* client, const char* name, uint64_t* value);
/* Microseconds of CLOCK_MONOTONIC, the clock of the timeline. */
int64_t nereus_monotonic_us(void);
/* Records a span on this worker's timeline (option timeline), lane 0 the
 * trainer's compute, 1 a copy device-to-host, 2 host-to-device. No-op
 * without a timeline. */
void nereus_trace_span(nereus_client_t* client, const char* name, int64_t clock, int64_t begin_us, int64_t end_us,
                       int lane);
/* Writes the timeline (if set), tells the job this worker is done and
 * blocks until every worker has finished. Call after the last handle is
 * done; then destroy the client. */
int nereus_finish(nereus_client_t* client);
/* This worker cannot go on because of `message` (its training failed):
 * tells the job, which ends at once with an error naming this worker and
 * `message` on every node, instead of waiting out heartbeat_timeout_ms for
 * its silence; every handle of this client then fails with `message`. Call
 * it instead of nereus_finish, then destroy the client. Nothing once the
 * job has ended or aborted. */
int nereus_fail(nereus_client_t* client, const char* message);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NEREUS_C_API_H_ */
