// The process supervisor (common/launch/subprocess.h) with real children (sh, true,
// false): exit codes and signals, output to a file and a pipe, a program that
// cannot run, the first failure among several, a deadline, a signal on the
// self-pipe, stopping children that ignore SIGTERM, a grandchild that holds an
// output pipe open, and RunCommand's bound. Every wait here is bounded.
#include "common/launch/subprocess.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace nereus {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

SubprocessOptions Sh(const std::string& script, SubprocessOptions::Output output = SubprocessOptions::Output::kPipe) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", script};
  o.output = output;
  return o;
}

std::string ReadAll(Subprocess& p) {
  std::string out;
  while (p.ReadOutput(&out)) {
    pollfd fd{p.output_fd(), POLLIN, 0};
    if (::poll(&fd, 1, 10000) <= 0) break;
  }
  return out;
}

TEST(Subprocess, ExitCodesSignalsAndOutput) {
  auto ok = Subprocess::Start(Sh("echo out; echo err >&2; exit 3"));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ReadAll(**ok), "out\nerr\n");
  EXPECT_EQ((*ok)->WaitFor(seconds(10)), 3);
  EXPECT_EQ((*ok)->DescribeExit(), "exited with status 3");
  EXPECT_FALSE((*ok)->running());

  auto killed = Subprocess::Start(Sh("kill -9 $$"));
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ((*killed)->WaitFor(seconds(10)), 128 + 9);
  EXPECT_EQ((*killed)->DescribeExit(), "was killed by signal 9 (Killed)");
}

TEST(Subprocess, OutputToAFileAndStdinFromNull) {
  char dir[] = "/tmp/nereus_subprocess_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string log = std::string(dir) + "/log";
  auto p = Subprocess::Start(Sh("cat; echo done", SubprocessOptions::Output::kFile));
  ASSERT_FALSE(p.ok());  // kFile without a file name.
  SubprocessOptions o = Sh("cat; echo done", SubprocessOptions::Output::kFile);
  o.output_file = log;
  auto q = Subprocess::Start(o);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ((*q)->WaitFor(seconds(10)), 0);  // cat read /dev/null: at once.
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "done\n");
  ::unlink(log.c_str());
  ::rmdir(dir);
}

TEST(Subprocess, AProgramThatCannotRunIsNamed) {
  SubprocessOptions o;
  o.argv = {"/nonexistent/nereus_nothing"};
  auto p = Subprocess::Start(o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "cannot run /nonexistent/nereus_nothing: No such file or directory");
}

TEST(Subprocess, TheDestructorKillsTheWholeGroup) {
  SubprocessOptions o = Sh("sleep 1000 & echo $!; wait");
  o.own_process_group = true;
  int grandchild = -1;
  {
    auto p = Subprocess::Start(o);
    ASSERT_TRUE(p.ok());
    std::string line;
    while (line.find('\n') == std::string::npos) {
      pollfd fd{(*p)->output_fd(), POLLIN, 0};
      ASSERT_GT(::poll(&fd, 1, 10000), 0);
      ASSERT_TRUE((*p)->ReadOutput(&line));
    }
    grandchild = static_cast<int>(::syscall(SYS_pidfd_open, std::stoi(line), 0));
    ASSERT_GE(grandchild, 0);
  }
  // Killed with its group: its pidfd is readable once it has exited.
  pollfd fd{grandchild, POLLIN, 0};
  EXPECT_EQ(::poll(&fd, 1, 10000), 1) << "the grandchild still runs";
  ::close(grandchild);
}

TEST(Supervisor, TheFirstFailureEndsTheWaitWithItsOutput) {
  std::map<size_t, std::string> out;
  std::map<size_t, int> ends;
  Supervisor::Options so;
  so.on_output = [&](size_t i, const std::string& data) {
    if (data.empty()) ++ends[i];
    out[i] += data;
  };
  Supervisor s(so);
  ASSERT_TRUE(s.Start("long", Sh("exec sleep 1000")).ok());
  ASSERT_TRUE(s.Start("fails", Sh("echo last words; exit 7")).ok());
  const auto e = s.Wait(Clock::now() + seconds(30));
  ASSERT_EQ(e.kind, Supervisor::Event::kFailed);
  EXPECT_EQ(e.index, 1u);
  EXPECT_EQ(s.name(1), "fails");
  EXPECT_EQ(out[1], "last words\n");  // Read before the failure was reported.
  EXPECT_EQ(*s.child(1).exit_code(), 7);
  const auto t0 = Clock::now();
  EXPECT_TRUE(s.Stop(nullptr, seconds(10)).ok());
  EXPECT_LT(Clock::now() - t0, seconds(5));  // SIGTERM ended sleep at once.
  EXPECT_EQ(*s.child(0).exit_code(), 128 + SIGTERM);
  EXPECT_EQ(ends[0], 1);
  EXPECT_EQ(ends[1], 1);
}

TEST(Supervisor, AllExitedAfterTheirOutputEnded) {
  std::string out;
  Supervisor::Options so;
  so.on_output = [&](size_t, const std::string& data) { out += data; };
  Supervisor s(so);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.Start("c" + std::to_string(i), Sh("echo " + std::to_string(i))).ok());
  EXPECT_EQ(s.Wait(Clock::now() + seconds(30)).kind, Supervisor::Event::kAllExited);
  std::string sorted = out;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, "\n\n\n012");
}

TEST(Supervisor, ADeadlineAndASignalEndTheWait) {
  Supervisor::Options so;
  auto signals = SignalPipe::Create({SIGUSR1});
  ASSERT_TRUE(signals.ok()) << signals.status();
  EXPECT_FALSE(SignalPipe::Create({SIGUSR2}).ok());  // One at a time.
  so.signals = signals->get();
  Supervisor s(so);
  ASSERT_TRUE(s.Start("long", Sh("exec sleep 1000")).ok());
  const auto t0 = Clock::now();
  EXPECT_EQ(s.Wait(t0 + milliseconds(200)).kind, Supervisor::Event::kDeadline);
  EXPECT_GE(Clock::now() - t0, milliseconds(200));
  ::kill(::getpid(), SIGUSR1);
  const auto e = s.Wait(Clock::now() + seconds(30));
  EXPECT_EQ(e.kind, Supervisor::Event::kSignal);
  EXPECT_EQ(e.signal, SIGUSR1);
  EXPECT_EQ((*signals)->Take(), 0);  // Taken by the wait.
  EXPECT_TRUE(s.Stop(nullptr, seconds(10)).ok());
}

TEST(Supervisor, StopKillsWhatIgnoresSigtermAfterTheGraceAndBoundsAPipeLeftOpen) {
  std::string holder_out;
  Supervisor::Options so;
  so.output_drain = milliseconds(300);
  so.on_output = [&](size_t i, const std::string& data) {
    if (i == 1) holder_out += data;
  };
  Supervisor s(so);
  // Started with SIGTERM ignored (inherited, and kept across exec).
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGTERM, &ignore, &old);
  auto stubborn = s.Start("stubborn", Sh("exec sleep 1000"));
  ::sigaction(SIGTERM, &old, nullptr);
  ASSERT_TRUE(stubborn.ok());
  // Exits at once, but a process of another session keeps its output pipe.
  ASSERT_TRUE(s.Start("holder", Sh("setsid sleep 1000 & echo $!")).ok());
  const auto t0 = Clock::now();
  EXPECT_EQ(s.Wait(t0 + milliseconds(300)).kind, Supervisor::Event::kDeadline);
  EXPECT_TRUE(s.Stop(nullptr, milliseconds(300)).ok());
  EXPECT_LT(Clock::now() - t0, seconds(5)) << "the pipe left open was not given up after the drain bound";
  EXPECT_EQ(*s.child(0).exit_code(), 128 + SIGKILL);
  EXPECT_EQ(*s.child(1).exit_code(), 0);
  ASSERT_FALSE(holder_out.empty());
  ::kill(std::stoi(holder_out), SIGKILL);  // Not the supervisor's: its own session.
}

TEST(RunCommand, CapturesOutputAndBoundsTheRun) {
  std::string out;
  auto code = RunCommand({"sh", "-c", "echo hi; exit 4"}, &out);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 4);
  EXPECT_EQ(out, "hi\n");
  const auto t0 = Clock::now();
  auto slow = RunCommand({"sleep", "1000"}, &out, milliseconds(200));
  EXPECT_EQ(slow.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(slow.status().message(), "sleep did not finish within 200 ms; killed");
  EXPECT_LT(Clock::now() - t0, seconds(5));
}

TEST(SignalPipe, AnIgnoredSignalStaysIgnored) {
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGUSR2, &ignore, &old);
  {
    auto signals = SignalPipe::Create({SIGUSR2});
    ASSERT_TRUE(signals.ok());
    ::kill(::getpid(), SIGUSR2);
    EXPECT_EQ((*signals)->Take(), 0);
  }
  ::sigaction(SIGUSR2, &old, nullptr);
}

}  // namespace
}  // namespace nereus
