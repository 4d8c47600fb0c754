// A test fixture for the public API, run once per fault backend: a store in a
// fresh temporary directory, opened with the test's options, and checks that
// run in a fresh process (where no page of the store is mapped yet).
#pragma once

#include <gtest/gtest.h>
#include <steppe/steppe.hpp>

#include <functional>
#include <string>

#include "support/temp_dir.hpp"

namespace steppe::test {

class store_fixture : public ::testing::TestWithParam<steppe::fault_backend> {
protected:
    temp_dir dir;
    std::string path = dir.path("s.db");

    // Not durable (these tests check logic, crash tests check the disk); the
    // test's backend. Tests adjust the options in a lambda.
    steppe::open_options options(const std::function<void(steppe::open_options&)>& adjust = {}) const;
    steppe::store open(const std::function<void(steppe::open_options&)>& adjust = {}) const;
    // Runs `check` in a fresh process on the store reopened there; the test
    // fails if `check` does, throws, or the process dies.
    // `adjust` the options it opens with, as for open().
    void in_fresh_process(const std::function<void(steppe::store&)>& check,
                          const std::function<void(steppe::open_options&)>& adjust = {}) const;
};

// Parameter names for INSTANTIATE_TEST_SUITE_P: "uffd", "mprotect".
std::string backend_name(const ::testing::TestParamInfo<steppe::fault_backend>& info);

// Instantiates a store_fixture suite for both backends.
#define STEPPE_BOTH_BACKENDS(suite)                                                                       \
    INSTANTIATE_TEST_SUITE_P(Backends, suite,                                                             \
                             ::testing::Values(steppe::fault_backend::uffd, steppe::fault_backend::mprotect), \
                             steppe::test::backend_name)

}  // namespace steppe::test
