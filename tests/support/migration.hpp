// What the migration tests of both engines share (unit/migrate_test.cpp,
// objects/objects_migrate_test.cpp): a store meets two builds of one
// program, "program 1" (a separate executable with the old types) and the
// test (the new ones).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace steppe::test {

// `command` run by the shell; its exit code (-1 if it did not exit).
int run_program(const std::string& command);

// The store's files at `path`, main file and log, as one hash: a refused
// migration must leave them byte for byte.
std::size_t store_files_hash(const std::string& path);

// After a crash during a migration, the store is the new one or the old one,
// whole: true if `open_new` (the test opening and walking the store with the
// new types) gets through; otherwise it must have failed with type_mismatch
// (the old types) and `verify_old` (program 1's verify command) exit 0.
// `what` names the crash in failures.
bool expect_old_or_new(const std::string& what, const std::function<void()>& open_new,
                       const std::string& verify_old);

}  // namespace steppe::test
