// The one seam through which storage/ touches files. Production uses real
// files and real fdatasync (posix_env); tests substitute an env that loses
// unsynced writes, tears pages and fails chosen calls.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace steppe::storage {

class file {
public:
    virtual ~file() = default;
    // Reads up to out.size() bytes at `offset`; returns the count (short only at end of file).
    virtual std::size_t read_at(std::uint64_t offset, std::span<std::byte> out) = 0;
    // The same for the signal-context read path: no allocation, no throw.
    // Returns the count, or -errno on failure.
    virtual long read_at_nothrow(std::uint64_t offset, std::byte* out, std::size_t size) noexcept = 0;
    // read_at_nothrow, but only from the page cache: -EAGAIN when the bytes
    // would have to come from the disk (files that cannot tell just read).
    virtual long read_cached_nothrow(std::uint64_t offset, std::byte* out, std::size_t size) noexcept {
        return read_at_nothrow(offset, out, size);
    }
    virtual void write_at(std::uint64_t offset, std::span<const std::byte> data) = 0;
    // A hint that these bytes will be read soon (start reading them now).
    // Async-signal-safe; failures are ignored: it is only a hint.
    virtual void will_need(std::uint64_t offset, std::size_t size) noexcept {
        (void)offset;
        (void)size;
    }
    // The read-ahead of the device the file lives on, in bytes (0: unknown).
    virtual std::uint64_t device_read_ahead() const noexcept { return 0; }
    virtual void sync() = 0;  // fdatasync: everything written so far is durable after it returns
    // Cuts the file to `size` bytes; like a write, durable only after sync().
    virtual void truncate(std::uint64_t size) = 0;
    virtual std::uint64_t size() = 0;
    virtual const std::string& path() const = 0;
};

enum class open_mode { read_only, read_write, create_new };

// Who takes a store's lock.
enum class lock_kind {
    writer,  // exclusive flocks: one writer, and no reader that holds a flock
    reader,  // shared flocks: readers only (a store without a usable reader table)
    snapshot,  // no flock: a reader beside the writer, in the reader table (reader_table.hpp)
};

// A held lock on a store; released when destroyed (or when the process dies).
// One writer or any number of readers per store FILE, whatever name, link or
// spelling of the path each opens it by (posix_env.cpp says how).
class lock_handle {
public:
    virtual ~lock_handle() = default;
    // Also locks the main file itself, which exists by now (it may not when
    // env::lock is called: creation happens under the lock). Throws locked.
    virtual void lock_store_file() = 0;
    // Whether a writer holds the store by this name now: only a reader
    // beside one (lock_kind::snapshot) can see one; a writer's or a flock
    // reader's lock excludes it.
    virtual bool writer_beside() const { return false; }
};

class env {
public:
    virtual ~env() = default;
    virtual std::unique_ptr<file> open(const std::string& path, open_mode mode, mode_t create_mode) = 0;
    virtual bool exists(const std::string& path) = 0;
    virtual void rename(const std::string& from, const std::string& to) = 0;
    virtual void remove(const std::string& path) = 0;
    virtual void sync_dir_of(const std::string& path) = 0;
    // A lock of `kind` on the store whose main file is `store_path`
    // (symlinks resolved, see resolve_store_path), waiting up to `wait` while
    // another process holds a conflicting one; throws errc::locked naming the
    // holder, or saying that this process has the store open already (which
    // no wait helps). Releasing a writer's lock removes the lock file and,
    // when the open that took it failed to create the store, the files that
    // open created: a failed open leaves nothing behind.
    virtual std::unique_ptr<lock_handle> lock(const std::string& store_path, lock_kind kind, mode_t create_mode,
                                              std::chrono::milliseconds wait) = 0;
};

// `path` with every symlink in its last component followed (relative targets
// from the link's directory), so that the files named after the store
// (NAME-wal, NAME-lock) are the real store's whichever link it is opened by.
// A path that cannot be examined is returned as it is, for open to report.
std::string resolve_store_path(const std::string& path);

// The real file system. Lives for the whole process.
env& posix_env();

// ::open(path, flags | O_CLOEXEC, mode) for one of a store's files (NAME,
// NAME-wal, NAME-lock, NAME-shm and their temporaries). Anything but a
// regular file there (a FIFO, a device, a directory) is errc::version
// naming the path and what it is, at once: the open itself never waits
// (O_NONBLOCK: reading a FIFO would wait for a writer that never comes).
// Returns the descriptor, or -1 with errno for the caller to judge.
int open_regular(const std::string& path, int flags, mode_t mode = 0);

// The read-ahead of the block device that holds the file open as `fd`, in
// bytes: /sys/dev/block/MAJOR:MINOR/queue/read_ahead_kb, or its parent's for
// a partition; 0 where there is none (overlay and network file systems).
std::uint64_t device_read_ahead_of(int fd) noexcept;

}  // namespace steppe::storage
