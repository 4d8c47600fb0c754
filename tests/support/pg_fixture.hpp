// The fixture of the tests against the test process's own PostgreSQL server
// (pg_server.hpp): the server, or a skip saying why none can run here; the
// test's name as its store's name (at most 60 characters, as a store name
// and part of a URL) and that store's URL. Fixtures that need more call
// pg_test::SetUp() first and return if IsSkipped(); those with an `open`
// of their own bring this one's back with `using pg_test::open`.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "storage/pg_store.hpp"
#include "support/pg_server.hpp"

namespace steppe::test {

class pg_test : public ::testing::Test {
protected:
    void SetUp() override {
        std::string why;
        server = pg_server::get(why);
        if (!server) GTEST_SKIP() << "no PostgreSQL server here: " << why;
        name = std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()).substr(0, 60);
        url = server->url(name);
    }

    // The store at `at`, as the attack tests open it: a writer waits up to
    // 10 s for the lock a killed writer's session held.
    std::unique_ptr<storage::storage> open(const std::string& at, bool read_only = false,
                                           std::uint64_t checkpoint_bytes = 64ull << 20) {
        storage::options o;
        o.read_only = read_only;
        o.lock_timeout = std::chrono::seconds(10);
        o.checkpoint_bytes = checkpoint_bytes;
        return storage::storage::open(at, o);
    }
    // The PostgreSQL backend of a writer's session.
    static int backend_of(const storage::storage& s) {
        return dynamic_cast<const storage::pg_store&>(s).backend_pid();
    }

    pg_server* server = nullptr;
    std::string name, url;
};

}  // namespace steppe::test
