#include <steppe/error.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <compare>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/system_error.hpp"
#include "storage/io.hpp"

namespace steppe::storage {

std::uint64_t device_read_ahead_of(int fd) noexcept {
    struct stat st;
    if (::fstat(fd, &st) != 0) return 0;
    const std::string dev =
        "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
    for (const char* tail : {"/queue/read_ahead_kb", "/../queue/read_ahead_kb"}) {
        std::ifstream f(dev + tail);
        std::uint64_t kib = 0;
        if (f >> kib) return kib << 10;
    }
    return 0;
}

namespace {

const char* kind_of(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISSOCK(mode)) return "a socket";
    return "of an unknown kind";
}

// What a file named after the store would be, for the message.
std::string role_of(const std::string& path) {
    for (auto [suffix, role] : {std::pair{"-wal", "a steppe store's log"}, {"-lock", "a steppe store's lock file"},
                                {"-shm", "a steppe store's reader table"}})
        if (path.ends_with(suffix)) return role;
    return "a steppe store";
}

}  // namespace

int open_regular(const std::string& path, int flags, mode_t mode) {
    // The store's own files are named after its real path (symlinks to the
    // store are resolved first): a symlink planted in place of its log, lock
    // file or reader table would have a writer write through it, wherever
    // it points.
    const std::string role = role_of(path);
    const bool sibling = role != "a steppe store";
    int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (sibling ? O_NOFOLLOW : 0), mode);
    if (fd < 0 && sibling && errno == ELOOP)
        throw error(errc::version, path + " is a symbolic link, not " + role + "; steppe never follows one in its "
                                          "place, and nothing was read or written through it (move it away)");
    auto refuse = [&](mode_t kind) {
        throw error(errc::version, path + " is " + kind_of(kind) + ", not a regular file, so not " + role +
                                       "; nothing was read from it or written to it (" +
                                       (role == "a steppe store" ? "name the store's own file" : "move it away") +
                                       ")");
    };
    if (fd < 0 && errno == EISDIR) refuse(S_IFDIR);  // a directory cannot be opened for writing
    if (fd < 0) return -1;
    struct stat st;
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        common::throw_system_error("fstat", err, path);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        refuse(st.st_mode);
    }
    // Only the open was to be spared a wait; reads and writes of a regular
    // file ignore the flag, but nothing should depend on that.
    if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        const int err = errno;
        ::close(fd);
        common::throw_system_error("fcntl(F_SETFL)", err, path);
    }
    return fd;
}

namespace {

class posix_file final : public file {
    // Written pages wait in the page cache for writeback, and in a memory
    // cgroup they are charged to the program: a log grown by 64 MiB of
    // zeros, a big transaction's spills or a checkpoint's copy could fill
    // a small cgroup with pages dirty or under writeback, which reclaim
    // cannot drop, and the program was killed (seen: 16 MiB under
    // writeback beside 46 MiB of heap in a 64 MiB group). So every
    // pace_bytes written, the writeback started a window before is waited
    // for and this window's is started: at most about two windows of a
    // file's pages are dirty or being written. Advisory: errors show at
    // the next sync.
    static constexpr std::uint64_t pace_bytes = 8ull << 20;
    void pace_writeback(std::uint64_t written) noexcept {
        if (unpaced_.fetch_add(written, std::memory_order_relaxed) + written < pace_bytes) return;
        unpaced_.store(0, std::memory_order_relaxed);
        ::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE);
        ::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE);
    }
    std::atomic<std::uint64_t> unpaced_{0};  // bytes written since the last pace

public:
    posix_file(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
    ~posix_file() override { ::close(fd_); }

    std::size_t read_at(std::uint64_t offset, std::span<std::byte> out) override {
        long n = read_at_nothrow(offset, out.data(), out.size());
        if (n < 0) common::throw_system_error("pread", static_cast<int>(-n), path_, "offset " + std::to_string(offset));
        return static_cast<std::size_t>(n);
    }

    long read_at_nothrow(std::uint64_t offset, std::byte* out, std::size_t size) noexcept override {
        std::size_t done = 0;
        while (done < size) {
            ssize_t n = ::pread(fd_, out + done, size - done, static_cast<off_t>(offset + done));
            if (n < 0) {
                if (errno == EINTR) continue;
                return -errno;
            }
            if (n == 0) break;
            done += static_cast<std::size_t>(n);
        }
        return static_cast<long>(done);
    }

    long read_cached_nothrow(std::uint64_t offset, std::byte* out, std::size_t size) noexcept override {
        iovec v{out, size};
        for (;;) {
            ssize_t n = ::preadv2(fd_, &v, 1, static_cast<off_t>(offset), RWF_NOWAIT);
            if (n >= 0 && static_cast<std::size_t>(n) == size) return static_cast<long>(n);
            if (n >= 0 || errno == EAGAIN) return -EAGAIN;  // partly cached counts as a miss
            if (errno != EINTR) return read_at_nothrow(offset, out, size);  // no RWF_NOWAIT here
        }
    }

    void write_at(std::uint64_t offset, std::span<const std::byte> data) override {
        std::size_t done = 0;
        while (done < data.size()) {
            ssize_t n = ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
            if (n < 0) {
                if (errno == EINTR) continue;
                common::throw_system_error("pwrite", errno, path_, "offset " + std::to_string(offset + done));
            }
            done += static_cast<std::size_t>(n);
        }
        pace_writeback(data.size());
    }

    void sync() override {
        if (::fdatasync(fd_) != 0) common::throw_system_error("fdatasync", errno, path_);
    }

    void truncate(std::uint64_t size) override {
        if (::ftruncate(fd_, static_cast<off_t>(size)) != 0)
            common::throw_system_error("ftruncate", errno, path_, "to " + std::to_string(size) + " bytes");
    }

    void will_need(std::uint64_t offset, std::size_t size) noexcept override {
        (void)::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(size), POSIX_FADV_WILLNEED);
    }

    std::uint64_t device_read_ahead() const noexcept override { return device_read_ahead_of(fd_); }

    std::uint64_t size() override {
        struct stat st;
        if (::fstat(fd_, &st) != 0) common::throw_system_error("fstat", errno, path_);
        return static_cast<std::uint64_t>(st.st_size);
    }

    const std::string& path() const override { return path_; }

private:
    int fd_;
    std::string path_;
};

// Locking: one writer or any number of readers per store file.
//
//   1. The lock file NAME-lock (flock: LOCK_EX for a writer, LOCK_SH for a
//      reader). It serializes creation, which happens before there is a main
//      file to lock, and the writer writes its pid into it for the message a
//      second opener gets (a hint only: the flock is the lock). A writer
//      creates it and removes it when it lets go (after a failed open too);
//      a reader never creates it. Whoever gets the flock checks that the name
//      still leads to the file it locked (the holder may have removed it in
//      between) and otherwise starts over, so two holders of two lock files
//      cannot both believe they hold the store.
//   2. The main file itself (flock on a descriptor of its own), once it
//      exists: the lock follows the file, not its name, so a hard link or
//      another spelling of the path cannot make a second writer. Symlinks are
//      resolved before NAME is formed (resolve_store_path), so the log and
//      lock file are the real store's.
//   3. A table of the main files (device, inode) this process holds. Two
//      opens in one process would otherwise conflict on their own flocks and
//      be told "locked by process <own pid>". Entries of another pid were
//      inherited through fork: they are stale, and the flock (shared with the
//      parent) answers for the parent.
//
// flock locks belong to the open file description, which a fork shares. A
// forked child closes its copies of the lock descriptors at once (a fork
// handler): that releases nothing of the parent's, and the child does not
// keep the store locked after the parent closes it. LOCK_UN would release
// the parent's lock, so this code never uses it, and a lock handle
// destroyed in a child does nothing.

struct file_id {
    dev_t dev;
    ino_t ino;
    auto operator<=>(const file_id&) const = default;
};

file_id id_of(const struct stat& st) { return {st.st_dev, st.st_ino}; }

class held_files {
public:
    // Throws locked if this process holds the file in a way that conflicts.
    void check(file_id id, bool exclusive, const std::string& path) {
        std::lock_guard hold(mutex_);
        check_locked(id, exclusive, path);
    }
    // The same, then counts one more holder.
    void add(file_id id, bool exclusive, const std::string& path) {
        std::lock_guard hold(mutex_);
        check_locked(id, exclusive, path);
        entry& e = held_[id];
        if (e.pid != ::getpid()) e = {::getpid(), exclusive, 0, path};
        ++e.holders;
    }
    void remove(file_id id) noexcept {
        std::lock_guard hold(mutex_);
        auto it = held_.find(id);
        if (it != held_.end() && --it->second.holders == 0) held_.erase(it);
    }

    // Descriptors holding locks, closed in a forked child.
    void add_descriptor(int fd) {
        std::lock_guard hold(mutex_);
        descriptors_.push_back(fd);
    }
    // Closes it (the lock goes with it) unless this is a child forked since it was taken.
    void close_descriptor(int fd) noexcept {
        std::lock_guard hold(mutex_);
        auto it = std::find(descriptors_.begin(), descriptors_.end(), fd);
        if (it != descriptors_.end()) descriptors_.erase(it);
        ::close(fd);
    }

    // Fork handlers: the table is whole in the child, which closes the descriptors.
    static void before_fork() noexcept;
    static void in_parent() noexcept;
    static void in_child() noexcept;

private:
    void check_locked(file_id id, bool exclusive, const std::string& path) const {
        auto it = held_.find(id);
        if (it == held_.end() || it->second.pid != ::getpid() || (!exclusive && !it->second.exclusive)) return;
        throw error(errc::locked, "store " + path + " is already open in this process" +
                                      (it->second.path == path ? "" : " (as " + it->second.path + ")") +
                                      (it->second.exclusive ? "" : ", read-only") +
                                      "; open it once and share the steppe::store");
    }

    struct entry {
        pid_t pid = 0;
        bool exclusive = false;
        int holders = 0;
        std::string path;
    };
    std::mutex mutex_;
    std::map<file_id, entry> held_;
    std::vector<int> descriptors_;
};

held_files& held() {
    static held_files* instance = [] {
        auto* table = new held_files;  // never destroyed: fork handlers and late destructors use it
        if (int err = ::pthread_atfork(held_files::before_fork, held_files::in_parent, held_files::in_child))
            common::throw_system_error("pthread_atfork", err, "-", "registering the lock table's fork handler");
        return table;
    }();
    return *instance;
}

void held_files::before_fork() noexcept { held().mutex_.lock(); }
void held_files::in_parent() noexcept { held().mutex_.unlock(); }
void held_files::in_child() noexcept {
    held_files& h = held();
    for (int fd : h.descriptors_) ::close(fd);
    h.descriptors_.clear();
    h.mutex_.unlock();
}

// Does `path` still name the file open as `fd`? (A missing path does not.)
bool names_file(int fd, const std::string& path) {
    struct stat open_st, path_st;
    if (::fstat(fd, &open_st) != 0) common::throw_system_error("fstat", errno, path);
    if (::stat(path.c_str(), &path_st) != 0) {
        if (errno == ENOENT) return false;
        common::throw_system_error("stat", errno, path);
    }
    return id_of(open_st) == id_of(path_st);
}

bool exists_nothrow(const std::string& path) noexcept {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

std::string read_pid(int fd) {
    char buf[32] = {};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return "unknown (a reader)";
    std::string pid(buf, static_cast<std::size_t>(n));
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == '\0')) pid.pop_back();
    return pid.empty() ? "unknown (a reader)" : pid;
}

// The pid /proc/locks names for an exclusive flock on `id`, or "unknown".
std::string flock_holder(file_id id) {
    std::ifstream locks("/proc/locks");
    std::string line;
    while (std::getline(locks, line)) {
        char kind[16], mode[16], access[16];
        long pid = 0;
        unsigned major_no = 0, minor_no = 0;
        unsigned long inode = 0;
        if (std::sscanf(line.c_str(), "%*d: %15s %15s %15s %ld %x:%x:%lu", kind, mode, access, &pid, &major_no,
                        &minor_no, &inode) == 7 &&
            std::strcmp(kind, "FLOCK") == 0 && std::strcmp(access, "WRITE") == 0 && major_no == major(id.dev) &&
            minor_no == minor(id.dev) && inode == id.ino)
            return std::to_string(pid);
    }
    return "unknown";
}

using lock_clock = std::chrono::steady_clock;

// flock(fd, op), retried until `deadline` while another process holds a
// conflicting lock (open_options::lock_timeout). Returns 0 or the errno.
int flock_until(int fd, int op, lock_clock::time_point deadline) {
    for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
        if (::flock(fd, op | LOCK_NB) == 0) return 0;
        int err = errno;
        if (err == EINTR) continue;
        lock_clock::time_point now = lock_clock::now();
        if (err != EWOULDBLOCK || now >= deadline) return err;
        std::this_thread::sleep_for(std::min<lock_clock::duration>(pause, deadline - now));
    }
}

// flock(fd) failed with `err` (after waiting `waited`): say who holds the
// store, or why it failed. `lock_file` is empty when the lock refused was the
// main file's own.
[[noreturn]] void throw_lock_failure(int fd, int err, bool exclusive, const std::string& store_path,
                                     const std::string& lock_file, const std::string& holder,
                                     std::chrono::milliseconds waited) {
    if (err != EWOULDBLOCK) common::throw_system_error("flock", err, lock_file.empty() ? store_path : lock_file);
    std::string where = lock_file.empty() ? "" : " (lock file " + lock_file + ")";
    if (waited.count() > 0) where += " after waiting " + std::to_string(waited.count()) + " ms";
    // If a shared lock can be had, the holders now are readers (and the pid
    // in a lock file names a writer that may be long gone).
    if (exclusive && ::flock(fd, LOCK_SH | LOCK_NB) == 0)
        throw error(errc::locked, "store " + store_path + " is open read-only by other processes" + where +
                                      "; a writer must wait until they close it (open_options::lock_timeout)");
    if (holder == std::to_string(::getpid()))
        throw error(errc::locked, "store " + store_path + " is already open in this process" + where +
                                      "; open it once and share the steppe::store");
    // Without the lock file, the writer holding the file itself reached it by
    // another name (its lock file is named after that one).
    throw error(errc::locked, "store " + store_path + " is locked by process " + holder +
                                  (lock_file.empty() ? " (which opened the same file by another name, such as a hard link)"
                                                     : where));
}

// Closes a descriptor unless released.
struct closing {
    int fd;
    ~closing() {
        if (fd >= 0) ::close(fd);
    }
    int release() { return std::exchange(fd, -1); }
};

// The lock file is the first file a writer's open makes, so a store path in
// a directory that does not exist fails here: say that, not ENOENT of a file
// the user never named. (Where the directory is there, ENOENT has another
// cause, a dangling symlink in the lock file's place, and the caller says
// what the system said.)
void throw_if_no_directory(const std::string& store_path) {
    const std::filesystem::path dir = std::filesystem::path(store_path).parent_path();
    std::error_code ec;
    if (std::filesystem::exists(dir.empty() ? "." : dir, ec) || ec) return;
    throw error(errc::not_found, "store " + store_path + ": the directory " + dir.string() +
                                     " does not exist; create it first, or name a store in a directory that does");
}

class posix_lock final : public lock_handle {
public:
    posix_lock(std::string store_path, bool exclusive, mode_t create_mode, std::chrono::milliseconds wait)
        : store_path_(std::move(store_path)), lock_path_(store_path_ + "-lock"), exclusive_(exclusive),
          wait_(wait), deadline_(lock_clock::now() + wait), owner_(::getpid()) {
        struct stat st;
        if (::stat(store_path_.c_str(), &st) == 0) held().check(id_of(st), exclusive_, store_path_);
        for (int attempt = 0; lock_fd_ < 0; ++attempt) {
            // A lock file gone or replaced once this process holds its flock
            // is another opener's turn ending (it removes the file as it
            // lets go): contention, like a held flock, so a wait goes on to
            // its deadline. Each attempt waits in flock_until, so this does
            // not spin; without a wait, 100 in a row mean something odd.
            if (attempt >= 100 && lock_clock::now() >= deadline_)
                throw error(errc::locked, "store " + store_path_ + ": its lock file " + lock_path_ +
                                              " kept being removed or replaced while this process took it" +
                                              (wait_.count() > 0 ? " (for " + std::to_string(wait_.count()) +
                                                                       " ms, open_options::lock_timeout)"
                                                                 : ""));
            int fd = open_regular(lock_path_, exclusive_ ? O_RDWR | O_CREAT : O_RDONLY, create_mode);
            if (fd < 0 && !exclusive_ && errno == ENOENT) break;  // no writer since: nothing to share
            if (fd < 0) {
                const int err = errno;
                if (err == ENOENT) throw_if_no_directory(store_path_);
                common::throw_system_error("open", err, lock_path_, "the store's lock file");
            }
            closing guard{fd};
            if (int err = flock_until(fd, exclusive_ ? LOCK_EX : LOCK_SH, deadline_))
                throw_lock_failure(fd, err, exclusive_, store_path_, lock_path_, read_pid(fd), wait_);
            if (names_file(fd, lock_path_)) {
                held().add_descriptor(fd);
                lock_fd_ = guard.release();
            }
        }
        if (!exclusive_) return;
        try {
            // The pid is only a hint for the message a second opener gets; the flock is the lock.
            std::string pid = std::to_string(::getpid()) + "\n";
            if (::ftruncate(lock_fd_, 0) != 0)
                common::throw_system_error("ftruncate", errno, lock_path_, "recording the lock holder's pid");
            if (::pwrite(lock_fd_, pid.data(), pid.size(), 0) < 0)
                common::throw_system_error("write", errno, lock_path_, "recording the lock holder's pid");
        } catch (...) {
            release_lock_file();
            throw;
        }
        store_existed_ = exists_nothrow(store_path_);
        log_existed_ = exists_nothrow(store_path_ + "-wal");
    }

    ~posix_lock() override {
        if (::getpid() != owner_) return;  // a forked child: the parent's lock, not to be touched
        if (store_fd_ >= 0) {
            held().remove(store_id_);
            held().close_descriptor(store_fd_);  // closing releases the flock
        }
        if (exclusive_ && !store_existed_ && !exists_nothrow(store_path_)) {
            // This open was to create the store and did not: remove what it made.
            ::unlink((store_path_ + "-new").c_str());
            if (!log_existed_) ::unlink((store_path_ + "-wal").c_str());
        }
        release_lock_file();
    }

    void lock_store_file() override {
        int fd = open_regular(store_path_, O_RDONLY);
        if (fd < 0) common::throw_system_error("open", errno, store_path_, "to lock the store");
        closing guard{fd};
        struct stat st;
        if (::fstat(fd, &st) != 0) common::throw_system_error("fstat", errno, store_path_);
        held().add(id_of(st), exclusive_, store_path_);
        if (int err = flock_until(fd, exclusive_ ? LOCK_EX : LOCK_SH, deadline_)) {
            held().remove(id_of(st));
            throw_lock_failure(fd, err, exclusive_, store_path_, "", flock_holder(id_of(st)), wait_);
        }
        held().add_descriptor(fd);
        store_id_ = id_of(st);
        store_fd_ = guard.release();
    }

private:
    // A writer removes the lock file while it still holds it (others then
    // find it gone, or a new one, and start over); a reader leaves it.
    void release_lock_file() noexcept {
        if (lock_fd_ < 0) return;
        struct stat open_st, path_st;
        if (exclusive_ && ::fstat(lock_fd_, &open_st) == 0 && ::stat(lock_path_.c_str(), &path_st) == 0 &&
            id_of(open_st) == id_of(path_st))
            ::unlink(lock_path_.c_str());
        held().close_descriptor(lock_fd_);
        lock_fd_ = -1;
    }

    std::string store_path_, lock_path_;
    bool exclusive_;
    std::chrono::milliseconds wait_;   // open_options::lock_timeout
    lock_clock::time_point deadline_;  // for both flocks
    int lock_fd_ = -1;
    int store_fd_ = -1;
    file_id store_id_{};
    pid_t owner_;  // the process that took the lock
    bool store_existed_ = true, log_existed_ = true;
};

// A reader of the reader table (lock_kind::snapshot) takes no flock: the
// writer must be able to open beside it, and its slot in the table is what
// the writer respects. It still counts in this process's table of held
// files, so a writer and a reader of one store in one process are refused.
class table_reader_lock final : public lock_handle {
public:
    explicit table_reader_lock(std::string store_path) : store_path_(std::move(store_path)), owner_(::getpid()) {}
    ~table_reader_lock() override {
        if (registered_ && ::getpid() == owner_) held().remove(store_id_);
    }
    void lock_store_file() override {
        struct stat st;
        if (::stat(store_path_.c_str(), &st) != 0) common::throw_system_error("stat", errno, store_path_);
        refuse_writer_by_another_name();
        held().add(id_of(st), false, store_path_);
        store_id_ = id_of(st);
        registered_ = true;
    }
    bool writer_beside() const override { return exclusively_locked(store_path_ + "-lock"); }

private:
    // The table is the one of this name: a writer that reached the file by
    // another name (a hard link) publishes its commits in its own log and
    // table and checkpoints without knowing of this reader, which would then
    // read an old snapshot, or pages overwritten under it. Such a writer
    // holds the main file's flock but not this name's lock file (a writer
    // takes the lock file first and lets the main file go first, so a writer
    // by this name never shows as one by another; one closing between the
    // two looks is looked at again).
    void refuse_writer_by_another_name() const {
        for (int look = 0; look < 3; ++look) {
            if (!exclusively_locked(store_path_) || exclusively_locked(store_path_ + "-lock")) return;
        }
        throw error(errc::locked, "store " + store_path_ + " is open for writing by process " +
                                      flock_holder_of(store_path_) +
                                      " by another name (a hard link to the same file), whose commits and readers "
                                      "this name cannot see; open it by the name the writer used");
    }
    // Whether another process holds an exclusive flock on `path` (false if it
    // does not exist). Takes and drops a shared flock of its own descriptor:
    // closing it lets go of that one alone.
    static bool exclusively_locked(const std::string& path) {
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
        if (fd < 0) return false;
        const bool locked = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
        ::close(fd);
        return locked;
    }
    static std::string flock_holder_of(const std::string& path) {
        struct stat st;
        return ::stat(path.c_str(), &st) == 0 ? flock_holder(id_of(st)) : "unknown";
    }

    std::string store_path_;
    pid_t owner_;
    file_id store_id_{};
    bool registered_ = false;
};

class posix_env_impl final : public env {
public:
    std::unique_ptr<file> open(const std::string& path, open_mode mode, mode_t create_mode) override {
        int flags = 0;
        switch (mode) {
        case open_mode::read_only: flags = O_RDONLY; break;
        case open_mode::read_write: flags = O_RDWR; break;
        case open_mode::create_new: flags = O_RDWR | O_CREAT | O_EXCL; break;
        }
        int fd = open_regular(path, flags, create_mode);
        if (fd < 0) common::throw_system_error("open", errno, path);
        return std::make_unique<posix_file>(fd, path);
    }

    // An entry by that name, a dangling symlink too: where a store's files
    // go, one is in the way (a backup wrote its copy beside a dangling
    // DEST-wal, whose first writable open then failed "File exists").
    bool exists(const std::string& path) override {
        struct stat st;
        if (::lstat(path.c_str(), &st) == 0) return true;
        if (errno == ENOENT) return false;
        common::throw_system_error("stat", errno, path);
    }

    void rename(const std::string& from, const std::string& to) override {
        if (::rename(from.c_str(), to.c_str()) != 0) common::throw_system_error("rename", errno, from, "to " + to);
    }

    void remove(const std::string& path) override {
        if (::unlink(path.c_str()) != 0 && errno != ENOENT) common::throw_system_error("unlink", errno, path);
    }

    void sync_dir_of(const std::string& path) override {
        auto slash = path.rfind('/');
        std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
        int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) common::throw_system_error("open", errno, dir, "to sync the directory");
        int rc = ::fsync(fd);
        int err = errno;
        ::close(fd);
        if (rc != 0) common::throw_system_error("fsync", err, dir);
    }

    std::unique_ptr<lock_handle> lock(const std::string& store_path, lock_kind kind, mode_t create_mode,
                                      std::chrono::milliseconds wait) override {
        if (kind == lock_kind::snapshot) return std::make_unique<table_reader_lock>(store_path);
        return std::make_unique<posix_lock>(store_path, kind == lock_kind::writer, create_mode, wait);
    }
};

}  // namespace

std::string resolve_store_path(const std::string& path) {
    std::string resolved = path;
    // Absolute from the open on: a program that changes directory later
    // still reaches its store's files (its close left NAME-lock behind, and
    // a checkpoint's names would have been another directory's).
    if (!path.empty() && path.front() != '/') {
        char cwd[PATH_MAX];
        if (::getcwd(cwd, sizeof cwd) == nullptr)
            common::throw_system_error("getcwd", errno, path, "resolving the store path " + path);
        resolved = std::string(cwd) + "/" + path;
    }
    for (int links = 0; links < 40; ++links) {  // the kernel's own limit (ELOOP)
        struct stat st;
        if (::lstat(resolved.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return resolved;
        char target[PATH_MAX];
        ssize_t n = ::readlink(resolved.c_str(), target, sizeof target);
        if (n < 0) common::throw_system_error("readlink", errno, resolved, "resolving the store path " + path);
        if (static_cast<std::size_t>(n) == sizeof target)
            common::throw_system_error("readlink", ENAMETOOLONG, resolved, "resolving the store path " + path);
        std::string next(target, static_cast<std::size_t>(n));
        auto slash = resolved.rfind('/');
        resolved = next.front() == '/' || slash == std::string::npos ? next : resolved.substr(0, slash + 1) + next;
    }
    common::throw_system_error("open", ELOOP, path);
}

// Never destroyed: a store held in a global object closes in exit()'s
// static destructors, after function-local statics made later are gone.
env& posix_env() {
    static posix_env_impl& instance = *new posix_env_impl;
    return instance;
}

}  // namespace steppe::storage
