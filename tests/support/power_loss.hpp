// A power loss at each I/O call of an operation in turn (compaction,
// migration): the operation runs in a forked child whose file system
// (fault_env) kills it at call n, as a power loss there leaves the files
// (the loss mode cycles through drop_all, random_subset, random_torn and
// keep_all), for n = 1, 2, ... until a run gets through.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

#include "support/fault_env.hpp"

namespace steppe::test {

// Before each run `restore()` puts the files back; `operation(io)` runs in
// the child (an exception is a failed exit); after each run `check(what,
// through)` looks at the files ("power loss (mode) at call n"). Returns the
// number of I/O calls of the run that got through, or -1 if a check failed
// or a child ended otherwise than by getting through or by SIGKILL.
long power_loss_at_each_call(const std::function<void()>& restore,
                             const std::function<void(fault_env& io)>& operation,
                             const std::function<void(const std::string& what, bool through)>& check);

// A child process running `operation`: it exits 0 once through, 3 if it throws.
pid_t fork_running(const std::function<void()>& operation);
// `operation` in a child process (fork_running), waited for: true if it got through.
bool through_in_child(const std::function<void()>& operation);

// `kills` times: `restore()`, then `start()` (a child process's id) killed
// with SIGKILL after a random wait of up to 1.5 times `span_us` and reaped,
// then `check(i)` looks at the files after kill i.
void kill_at_random_instants(int kills, long long span_us, const std::function<void()>& restore,
                             const std::function<pid_t()>& start, const std::function<void(int kill)>& check);

}  // namespace steppe::test
