// The object engine against crashes: a crash before every write and sync of a
// commit, followed by each kind of power loss, leaves the previous commit or
// the new one, whole (docs/guarantees.md, promise 1, for the object engine);
// and kill -9 of a process committing in a loop leaves its last commit.
#include <gtest/gtest.h>
#include <signal.h>
#include <steppe/objects.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "support/fault_env.hpp"
#include "objects/object_engine.hpp"
#include "support/temp_dir.hpp"

namespace so = steppe::objects;

namespace {

struct Item {
    std::int64_t value;
    so::ref<Item> next;
};
struct Chain {
    std::int64_t generation;  // commits so far
    std::int64_t length;
    so::ref<Item> first;
};

so::options crash_options() {
    so::options o;
    o.segment_objects = 8;
    o.checkpoint_on_close = false;  // a crashed process writes nothing more
    return o;
}

// One transaction: every item's value becomes the generation, and `grow` new
// items go in front.
void advance(so::store& s, int grow) {
    auto chain = s.root<Chain>("chain");
    std::int64_t g = chain->generation + 1;
    for (so::ref<Item> p = chain->first; p; p = p->next) p.mut()->value = g;
    for (int i = 0; i < grow; ++i) chain.mut()->first = s.make<Item>(g, chain->first);
    chain.mut()->generation = g;
    chain.mut()->length += grow;
}

// The generation the store holds, after checking it is whole.
std::int64_t verify(so::store& s) {
    auto chain = s.find_root<Chain>("chain");
    if (!chain) return 0;
    std::int64_t n = 0;
    for (so::ref<Item> p = chain->first; p; p = p->next, ++n)
        EXPECT_EQ(p->value, chain->generation) << "item " << n << " is of another commit";
    EXPECT_EQ(n, chain->length);
    auto findings = s.check();
    EXPECT_TRUE(findings.empty()) << findings[0];
    return chain->generation;
}

TEST(ObjectsCrash, PowerLossAtEveryIoOfACommitLeavesOneCommitWhole) {
    const steppe::test::loss modes[] = {steppe::test::loss::keep_all, steppe::test::loss::drop_all,
                                        steppe::test::loss::random_subset, steppe::test::loss::torn};
    int crashes = 0, completed = 0;
    for (steppe::test::loss mode : modes) {
        for (long at = 0;; ++at) {
            steppe::test::temp_dir dir;
            std::string path = dir.path("crash.ods");
            steppe::test::fault_env env;
            bool crashed = false;
            {
                so::store s = so::detail::store_access::open(path, crash_options(), so::detail::compiled_scheme, &env);
                advance(s, 20);
                s.commit();  // generation 1
                advance(s, 10);
                env.crash_after(at);
                try {
                    s.commit();  // generation 2
                } catch (const steppe::test::simulated_crash&) {
                    crashed = true;
                }
                env.clear_faults();
            }
            env.power_loss(mode, static_cast<std::uint64_t>(at) * 31 + static_cast<std::uint64_t>(mode));
            so::store s = so::store::open(path, crash_options());
            std::int64_t g = verify(s);
            if (crashed) {
                EXPECT_TRUE(g == 1 || g == 2) << "crash at I/O " << at << ": generation " << g;
                ++crashes;
            } else {
                EXPECT_EQ(g, 2) << "a commit that returned was lost (" << at << " I/O calls allowed)";
                ++completed;
                break;
            }
        }
    }
    EXPECT_GT(crashes, 8);  // every I/O of the commit was a crash point, in four loss modes
    EXPECT_EQ(completed, 4);
}

TEST(ObjectsCrash, KillDuringCommitsLeavesTheLastCommit) {
    steppe::test::temp_dir dir;
    std::string path = dir.path("kill.ods");
    int pipefd[2];
    ASSERT_EQ(::pipe(pipefd), 0);
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::close(pipefd[0]);
        so::store s = so::store::open(path, crash_options());
        for (;;) {
            advance(s, 3);
            s.commit();
            std::int64_t g = s.find_root<Chain>("chain")->generation;
            if (::write(pipefd[1], &g, sizeof g) != sizeof g) ::_exit(2);
        }
    }
    ::close(pipefd[1]);
    std::int64_t reported = 0, g = 0;
    while (reported < 40 && ::read(pipefd[0], &g, sizeof g) == sizeof g) reported = g;
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ::close(pipefd[0]);
    ASSERT_GE(reported, 40);
    so::store s = so::store::open(path, crash_options());
    std::int64_t survived = verify(s);
    EXPECT_GE(survived, reported) << "a commit the child saw return was lost";
}

}  // namespace
