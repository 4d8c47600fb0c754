// What the migration tests of both engines share (unit/migrate_test.cpp,
// objects/objects_migrate_test.cpp): a store meets two builds of one
// program, "program 1" (a separate executable with the old types: `write
// STORE` builds the store, `verify STORE` checks it, exit 0) and the test
// (the new types).
#pragma once

#include <gtest/gtest.h>
#include <steppe/steppe.hpp>

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <string>

#include "support/temp_dir.hpp"

namespace steppe::test {

// `command` run by the shell; its exit code (-1 if it did not exit).
int run_program(const std::string& command);

// The store's files at `path`, main file and log, as one hash: a refused
// migration must leave them byte for byte.
std::size_t store_files_hash(const std::string& path);

// The store `name` in a new directory, written and verified by program 1.
class migration_test : public ::testing::Test {
protected:
    migration_test(std::string program1, const std::string& name)
        : program1_(std::move(program1)), path(dir.path(name)) {}
    void SetUp() override;

    // Program 1 with `args` ("verify " + path); its exit code.
    int run_v1(const std::string& args) const { return run_program(program1_ + " " + args); }
    // `m` is refused with `code`, the message saying each of `parts`, and
    // the store is left as it was (expect_untouched).
    void expect_refused(const migration& m, errc code, std::initializer_list<std::string> parts);
    // The files are byte for byte as when they hashed to `before`, no
    // leftover, and program 1 still reads the store.
    void expect_untouched(std::size_t before);
    // After a crash during a migration, the store is the new one or the old
    // one, whole: true if `open_new` (the test opening and walking the store
    // with the new types) gets through; otherwise it must have failed with
    // type_mismatch (the old types) and program 1 verify it. `what` names
    // the crash in failures.
    bool expect_old_or_new(const std::string& what, const std::function<void()>& open_new);
    // For the crash tests: the store as program 1 wrote it kept aside, and
    // put back (every file of the store removed first) before each run.
    void keep_original();
    void restore();

private:
    std::string program1_;

protected:
    temp_dir dir;
    std::string path;
};

}  // namespace steppe::test
