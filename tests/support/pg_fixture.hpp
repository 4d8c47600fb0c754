// The fixture of the tests against the test process's own PostgreSQL server
// (pg_server.hpp): the server, or a skip saying why none can run here; the
// test's name as its store's name (at most 60 characters, as a store name
// and part of a URL) and that store's URL. Fixtures that need more call
// pg_test::SetUp() first and return if IsSkipped(); those with an `open`
// of their own bring this one's back with `using pg_test::open`.
#pragma once

#include <gtest/gtest.h>
#include <steppe/steppe.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "storage/pg_store.hpp"
#include "support/pg_server.hpp"
#include "support/temp_dir.hpp"

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

// A test run on a file store and on a store in PostgreSQL (instantiated
// with both kinds): `where` names the store, the file in `dir` or a store
// of the test process's server named after the test (skipped with a
// message where no server can run).
enum class store_kind { file, postgresql };

class file_or_pg_test : public ::testing::TestWithParam<store_kind> {
protected:
    void SetUp() override {
        if (GetParam() == store_kind::file) {
            where = dir.path("s.db");
            return;
        }
        std::string why;
        server = pg_server::get(why);
        if (!server) GTEST_SKIP() << "no PostgreSQL server here: " << why;
        std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
        for (char& c : name)
            if (c == '/') c = '_';  // "Name/postgresql": a store name has no '/'
        where = server->url(name);
    }
    steppe::store open_reader() const {
        steppe::open_options o;
        o.read_only = true;
        return steppe::store::open(where, o);
    }

    temp_dir dir;
    pg_server* server = nullptr;
    std::string where;
};

}  // namespace steppe::test
