// A fault-injecting file system for tests, in the manner of SQLite's crash
// VFS (src/test6.c) and LevelDB's fault_injection_test: writes reach the real
// file at once (as they reach the OS page cache), but the env remembers what
// was durable at each file's last sync. power_loss() then rewrites every file
// it changed, in place, as the disk could have left it: the durable image
// plus all, none, a random subset, or a torn prefix of the writes made since.
//
// Every call that changes the file system is an I/O call, counted by calls()
// and a point where a fault can be injected: write, sync and truncate of a
// file, create (open of a new file), rename, remove, directory sync, and
// taking the store's lock and locking its main file. crash_after(n) makes the
// n-th following call throw simulated_crash before it happens (the process
// "dies" there; the test calls power_loss itself); kill_after(n, how, seed)
// makes the process really die there, by SIGKILL, after power_loss(how,
// seed) or, without `how`, as kill -9 leaves it (every write made so far
// survives in the page cache): for a forked process running a whole store
// through the public API (detail::open_with_env). fail_after(n, err) makes
// the call fail with errno `err` instead, once or persistently.
//
// Renames, creates and directory syncs are treated as immediately durable.
// Syncs are simulated (the durable images are what survives power_loss),
// unless sync_for_real(true) asks for the real fdatasync as well.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "storage/io.hpp"

namespace steppe::test {

struct simulated_crash {};

enum class loss {
    keep_all,       // every unsynced write reached the disk
    drop_all,       // none did
    random_subset,  // each did or did not
    torn,           // all did, but each file's last one stops at a random 512-byte sector
    random_torn,    // each did, did not, or stops at a random sector
};
const char* to_string(loss how);

class fault_env final : public storage::env {
public:
    fault_env();
    ~fault_env() override;

    void crash_after(long calls) { crash_countdown_ = calls; }
    void kill_after(long calls, std::optional<loss> how, std::uint64_t seed) {
        kill_countdown_ = calls;
        kill_loss_ = how;
        kill_seed_ = seed;
    }
    void fail_after(long calls, int err, bool persistent = false) {
        fail_countdown_ = calls;
        fail_errno_ = err;
        fail_persistent_ = persistent;
    }
    void clear_faults() {
        crash_countdown_ = kill_countdown_ = fail_countdown_ = -1;
        fail_persistent_ = false;
    }
    void sync_for_real(bool on) { real_sync_ = on; }
    long calls() const { return calls_; }
    // Unsynced writes recorded so far, over all files.
    std::size_t unsynced_writes() const;
    // Rewrites every file as a power loss now could leave it; forgets pending state.
    void power_loss(loss mode, std::uint64_t seed);
    // Ends the process now by SIGKILL, after power_loss(*how, seed) if `how`.
    [[noreturn]] void kill_now(std::optional<loss> how, std::uint64_t seed);

    std::unique_ptr<storage::file> open(const std::string& path, storage::open_mode mode, mode_t create_mode) override;
    bool exists(const std::string& path) override;
    void rename(const std::string& from, const std::string& to) override;
    void remove(const std::string& path) override;
    void sync_dir_of(const std::string& path) override;
    std::unique_ptr<storage::lock_handle> lock(const std::string& path, storage::lock_kind kind, mode_t mode,
                                               std::chrono::milliseconds wait) override;

    struct pending_write {
        std::uint64_t offset;
        std::vector<std::byte> data;
        bool truncate = false;  // cut the file at `offset` instead of writing
    };
    struct file_state {
        std::vector<std::byte> durable;  // contents as of the last sync, once loaded
        std::vector<pending_write> pending;
        bool loaded = false;  // durable read yet: at the first change (until then the file is as found)
    };
    // Called before each I/O call: counts it, and may kill, throw or fail.
    void before_call(const std::string& path, const char* call);

private:
    void load_durable(const std::string& path, file_state& state);

    std::map<std::string, file_state> files_;
    long calls_ = 0, crash_countdown_ = -1, kill_countdown_ = -1, fail_countdown_ = -1;
    std::optional<loss> kill_loss_;
    std::uint64_t kill_seed_ = 0;
    int fail_errno_ = 0;
    bool fail_persistent_ = false;
    bool real_sync_ = false;
    friend class fault_file;
};

}  // namespace steppe::test
