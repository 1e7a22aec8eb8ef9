// Child processes, for everything in the tree that starts and watches them:
// nereus_launch (common/launch/launch_main.cc), the cluster benchmark
// (bench/cluster_bench.cc), the netns helpers and the tests' LocalCluster
// (tests/support/process_util.h).
//
// How: posix_spawn (no code runs between fork and exec in this process), one
// pidfd per child (readable once it has exited), and poll() over the pidfds,
// the children's output pipes and a signal pipe. Nothing here installs a
// SIGCHLD handler, busy-waits or sleeps: every wait is a poll with a bound.
// A child still running when its Subprocess is destroyed is killed (SIGKILL,
// its whole process group if it has one) and reaped.
//
// Requires Linux >= 5.3 (pidfd_open) and SIGCHLD not ignored (a process that
// ignores SIGCHLD has its children reaped by the kernel; Start refuses then).
#ifndef NEREUS_COMMON_LAUNCH_SUBPROCESS_H_
#define NEREUS_COMMON_LAUNCH_SUBPROCESS_H_

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/base/status.h"

namespace nereus {

struct SubprocessOptions {
  // argv[0] is a path, or a name looked up in PATH.
  std::vector<std::string> argv;
  // Where stdout and stderr go: this process's (kInherit), a file (kFile:
  // `output_file`, truncated), or a pipe this process reads (kPipe:
  // Subprocess::ReadOutput).
  enum class Output { kInherit, kFile, kPipe };
  Output output = Output::kInherit;
  std::string output_file;
  // stdin: /dev/null when -1, else this descriptor (e.g. the read end of a
  // pipe whose write end the caller closes to say "stop"; not taken over).
  int input_fd = -1;
  // The child leads a process group of its own: Signal() reaches whatever it
  // starts, and a Ctrl-C at the terminal reaches only this process, which
  // decides how to stop its children.
  bool own_process_group = false;
};

class Subprocess {
 public:
  // Errors: the program cannot be run (named, with the reason), the output
  // file cannot be created, or SIGCHLD is ignored.
  static StatusOr<std::unique_ptr<Subprocess>> Start(const SubprocessOptions& options);
  ~Subprocess();

  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Readable (POLLIN) once the child has exited: a pidfd, for poll().
  int exit_fd() const { return pidfd_; }
  // The read end of the output pipe (non-blocking), or -1: not kPipe, or
  // end-of-file was read.
  int output_fd() const { return output_fd_; }
  // Appends what the output pipe holds now to `out`, without blocking.
  // Returns false once the pipe is at end-of-file (every writer closed it;
  // it is then closed here) or there is none.
  bool ReadOutput(std::string* out);
  // Closes the output pipe (what is still in it is lost).
  void CloseOutput();

  // Reaps the child if it has exited, without blocking; true if it has (now
  // or before).
  bool Reap();
  // Waits up to `timeout` for the child to exit (poll on the pidfd). Returns
  // its exit code (128 + the signal's number if a signal killed it), or
  // nullopt if it still runs.
  std::optional<int> WaitFor(std::chrono::milliseconds timeout);
  bool running() const { return !exit_code_.has_value(); }
  // Set once reaped: as WaitFor returns it.
  std::optional<int> exit_code() const { return exit_code_; }
  // "exited with status 2", "was killed by SIGKILL"; "is running".
  std::string DescribeExit() const;

  // Sends `sig` to the child (to its process group with own_process_group)
  // unless it has been reaped.
  void Signal(int sig);

 private:
  Subprocess(pid_t pid, int pidfd, int output_fd, bool group)
      : pid_(pid), pidfd_(pidfd), output_fd_(output_fd), group_(group) {}

  const pid_t pid_;
  const int pidfd_;
  int output_fd_;
  const bool group_;
  std::optional<int> exit_code_;
  int wait_status_ = 0;
};

// Runs `argv` to its end with stdout and stderr captured in `output` (may be
// null). Returns the exit code as Subprocess::WaitFor does; an error if it
// cannot start, or if it has not ended after `timeout` (it is killed then).
StatusOr<int> RunCommand(const std::vector<std::string>& argv, std::string* output,
                         std::chrono::milliseconds timeout = std::chrono::minutes(1));

// Signals as bytes on a pipe (the self-pipe trick), so that a poll loop sees
// them beside its children. The handler is the process's and only writes to
// the pipe (async-signal-safe), so whichever thread a signal lands on (a
// library may start threads before main) it is neither lost nor fatal. A
// signal ignored when the SignalPipe is made (nohup's SIGHUP, a background
// job's SIGINT) stays ignored. One SignalPipe at a time in a process; the
// pipe itself lives as long as the process, so that a handler still running
// when the SignalPipe goes can never write into a reused descriptor.
class SignalPipe {
 public:
  static StatusOr<std::unique_ptr<SignalPipe>> Create(const std::vector<int>& signals);
  ~SignalPipe();  // Restores the dispositions it replaced.

  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  // Readable (POLLIN) while a signal is pending.
  int fd() const { return read_fd_; }
  // The first signal received since the last call (the others are dropped:
  // callers treat them alike), or 0; never blocks.
  int Take();

 private:
  SignalPipe(int read_fd, std::vector<std::pair<int, struct sigaction>> saved)
      : read_fd_(read_fd), saved_(std::move(saved)) {}
  const int read_fd_;
  std::vector<std::pair<int, struct sigaction>> saved_;
};

// Children watched together: the first that fails, a signal, or a deadline
// ends the wait; Stop() then ends the others within a bound. Each child's
// output (SubprocessOptions::Output::kPipe) is handed to `on_output` as it
// comes, from inside Wait and Stop. Not thread-safe: one owner drives it.
class Supervisor {
 public:
  struct Options {
    // A piece of child `index`'s output; an empty piece once, at its end.
    std::function<void(size_t index, const std::string& data)> on_output;
    // Wakes Wait and Stop on a signal (may be null).
    SignalPipe* signals = nullptr;
    // Once every child has exited, how long Wait and Stop wait for the ends
    // of their output pipes (a grandchild can keep one open); then the pipes
    // are closed.
    std::chrono::milliseconds output_drain = std::chrono::seconds(2);
  };
  explicit Supervisor(Options options);
  // Kills (SIGKILL) and reaps every child still running.
  ~Supervisor();

  // Starts a child named `name` (for messages); returns its index. A child
  // that cannot start is an error and is not added.
  StatusOr<size_t> Start(const std::string& name, const SubprocessOptions& options);
  size_t size() const { return children_.size(); }
  const std::string& name(size_t index) const { return children_[index].name; }
  Subprocess& child(size_t index) { return *children_[index].process; }

  struct Event {
    enum Kind {
      kAllExited,  // Every child exited with status 0 and its output ended.
      kFailed,     // Child `index` exited otherwise (its output read to now).
      kSignal,     // `signal` arrived (Options::signals).
      kDeadline,   // The deadline passed.
    };
    Kind kind;
    size_t index = 0;
    int signal = 0;
  };
  // Waits for the first of those events; a child's failure is reported once.
  Event Wait(std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

  // Stops every child still running: `ask` asks them (nullptr: SIGTERM to
  // each), then they have `grace` to exit; a signal meanwhile (a second
  // Ctrl-C) or the end of `grace` kills the rest with SIGKILL. Returns once
  // every child is reaped and its output read, or names those that were not
  // reaped within `kill_wait` after SIGKILL (a process stuck in the kernel).
  Status Stop(const std::function<void()>& ask, std::chrono::milliseconds grace,
              std::chrono::milliseconds kill_wait = std::chrono::seconds(5));

 private:
  struct Child {
    std::string name;
    std::unique_ptr<Subprocess> process;
    bool reported = false;      // Its failure was returned by Wait.
    bool output_ended = false;  // on_output was told (or there is no pipe).
  };
  // One poll over the signal pipe, the running children's pidfds and the
  // open output pipes, up to `deadline`; reads output and reaps. Returns the
  // signal taken, or 0.
  int PollOnce(std::optional<std::chrono::steady_clock::time_point> deadline);
  void ReadOutput(Child& c, size_t index);
  bool AnyRunning() const;
  bool AnyOutputOpen() const;
  void CloseOutputs();

  Options options_;
  std::vector<Child> children_;
};

}  // namespace nereus

#endif  // NEREUS_COMMON_LAUNCH_SUBPROCESS_H_
