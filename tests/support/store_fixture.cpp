#include "support/store_fixture.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

namespace steppe::test {

steppe::open_options store_fixture::options(const std::function<void(steppe::open_options&)>& adjust) const {
    steppe::open_options o;
    o.backend = GetParam();
    o.durable = false;
    if (adjust) adjust(o);
    return o;
}

steppe::store store_fixture::open(const std::function<void(steppe::open_options&)>& adjust) const {
    return steppe::store::open(path, options(adjust));
}

void store_fixture::in_fresh_process(const std::function<void(steppe::store&)>& check,
                                     const std::function<void(steppe::open_options&)>& adjust) const {
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        int failures = 0;
        try {
            // Only the child's own failures count: it inherits the test's
            // (HasFailure() reported an earlier EXPECT of the parent as the
            // checking process's difference).
            const ::testing::TestResult& result = *::testing::UnitTest::GetInstance()->current_test_info()->result();
            const int before = result.total_part_count();
            auto s = open(adjust);
            check(s);
            for (int i = before; i < result.total_part_count(); ++i) failures |= result.GetTestPartResult(i).failed();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "child: %s\n", e.what());
            failures = 2;
        }
        std::fflush(stdout);
        ::_exit(failures);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << "the checking process died, status " << status;
    ASSERT_EQ(WEXITSTATUS(status), 0) << "the checking process found a difference";
}

std::string backend_name(const ::testing::TestParamInfo<steppe::fault_backend>& info) {
    return info.param == steppe::fault_backend::uffd ? "uffd" : "mprotect";
}

}  // namespace steppe::test
