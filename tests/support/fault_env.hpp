// A fault-injecting file system for tests, in the manner of SQLite's crash
// VFS (src/test6.c) and LevelDB's fault_injection_test: writes reach the real
// file at once (as they reach the OS page cache), but the env remembers what
// was durable at each file's last sync. power_loss() then rewrites every file
// as the disk could have left it: the durable image plus all, none, a random
// subset, or a torn prefix of the writes made since.
//
// crash_after(n) makes the n-th following write or sync throw simulated_crash
// before it happens (the process "dies" there); fail_after(n, err) makes it
// fail with errno `err` instead, once or persistently.
//
// Renames, creates and directory syncs are treated as immediately durable.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "storage/io.hpp"

namespace steppe::test {

struct simulated_crash {};

enum class loss { keep_all, drop_all, random_subset, torn };

class fault_env final : public storage::env {
public:
    fault_env();
    ~fault_env() override;

    void crash_after(long calls) { crash_countdown_ = calls; }
    void fail_after(long calls, int err, bool persistent = false) {
        fail_countdown_ = calls;
        fail_errno_ = err;
        fail_persistent_ = persistent;
    }
    void clear_faults() { crash_countdown_ = fail_countdown_ = -1; fail_persistent_ = false; }
    long calls() const { return calls_; }
    // Unsynced writes recorded so far, over all files.
    std::size_t unsynced_writes() const;
    // Rewrites every file as a power loss now could leave it; forgets pending state.
    void power_loss(loss mode, std::uint64_t seed);

    std::unique_ptr<storage::file> open(const std::string& path, storage::open_mode mode, mode_t create_mode) override;
    bool exists(const std::string& path) override;
    void rename(const std::string& from, const std::string& to) override;
    void remove(const std::string& path) override;
    void sync_dir_of(const std::string& path) override;
    std::unique_ptr<storage::lock_handle> lock(const std::string& path, bool exclusive, mode_t mode) override;

    struct pending_write {
        std::uint64_t offset;
        std::vector<std::byte> data;
        bool truncate = false;  // cut the file at `offset` instead of writing
    };
    struct file_state {
        std::vector<std::byte> durable;  // contents as of the last sync
        std::vector<pending_write> pending;
    };
    // Called by files before each write or sync: may throw or fail.
    void before_call(const std::string& path, const char* call);

private:
    file_state& state_of(const std::string& path);

    std::map<std::string, file_state> files_;
    long calls_ = 0, crash_countdown_ = -1, fail_countdown_ = -1;
    int fail_errno_ = 0;
    bool fail_persistent_ = false;
    friend class fault_file;
};

}  // namespace steppe::test
