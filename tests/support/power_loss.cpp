#include "support/power_loss.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

namespace steppe::test {

long power_loss_at_each_call(const std::function<void()>& restore,
                             const std::function<void(fault_env& io)>& operation,
                             const std::function<void(const std::string& what, bool through)>& check) {
    const loss modes[] = {loss::drop_all, loss::random_subset, loss::random_torn, loss::keep_all};
    for (long n = 1;; ++n) {
        restore();
        pid_t child = ::fork();
        if (child == 0) {
            fault_env io;
            io.kill_after(n, modes[n % 4], static_cast<std::uint64_t>(n));
            try {
                operation(io);
            } catch (...) {
                ::_exit(3);
            }
            ::_exit(0);
        }
        int status = 0;
        ::waitpid(child, &status, 0);
        const bool through = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        const bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        EXPECT_TRUE(through || killed) << "call " << n << ": " << status;
        if (!through && !killed) return -1;
        check("power loss (" + std::string(to_string(modes[n % 4])) + ") at call " + std::to_string(n), through);
        if (::testing::Test::HasFailure()) return -1;
        if (through) return n - 1;
    }
}

pid_t fork_running(const std::function<void()>& operation) {
    pid_t child = ::fork();
    if (child == 0) {
        try {
            operation();
        } catch (...) {
            ::_exit(3);
        }
        ::_exit(0);
    }
    return child;
}

bool through_in_child(const std::function<void()>& operation) {
    int status = 0;
    ::waitpid(fork_running(operation), &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void kill_at_random_instants(int kills, long long span_us, const std::function<void()>& restore,
                             const std::function<pid_t()>& start, const std::function<void(int kill)>& check) {
    std::mt19937_64 random(std::random_device{}());
    for (int i = 0; i < kills; ++i) {
        restore();
        pid_t child = start();
        std::this_thread::sleep_for(std::chrono::microseconds(random() % (span_us * 3 / 2 + 1)));
        ::kill(child, SIGKILL);
        int status = 0;
        ::waitpid(child, &status, 0);
        check(i);
    }
}

}  // namespace steppe::test
