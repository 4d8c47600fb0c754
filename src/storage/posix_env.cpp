#include <steppe/error.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/system_error.hpp"
#include "storage/io.hpp"

namespace steppe::storage {

void throw_system_error(const char* call, const std::string& path, int err, const std::string& context) {
    common::throw_system_error(call, err, context.empty() ? path : path + " (" + context + ")");
}

namespace {

class posix_file final : public file {
public:
    posix_file(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
    ~posix_file() override { ::close(fd_); }

    std::size_t read_at(std::uint64_t offset, std::span<std::byte> out) override {
        long n = read_at_nothrow(offset, out.data(), out.size());
        if (n < 0) throw_system_error("pread", path_, static_cast<int>(-n), "offset " + std::to_string(offset));
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
                throw_system_error("pwrite", path_, errno, "offset " + std::to_string(offset + done));
            }
            done += static_cast<std::size_t>(n);
        }
    }

    void sync() override {
        if (::fdatasync(fd_) != 0) throw_system_error("fdatasync", path_, errno);
    }

    void truncate(std::uint64_t size) override {
        if (::ftruncate(fd_, static_cast<off_t>(size)) != 0)
            throw_system_error("ftruncate", path_, errno, "to " + std::to_string(size) + " bytes");
    }

    void will_need(std::uint64_t offset, std::size_t size) noexcept override {
        (void)::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(size), POSIX_FADV_WILLNEED);
    }

    std::uint64_t size() override {
        struct stat st;
        if (::fstat(fd_, &st) != 0) throw_system_error("fstat", path_, errno);
        return static_cast<std::uint64_t>(st.st_size);
    }

    const std::string& path() const override { return path_; }

private:
    int fd_;
    std::string path_;
};

class posix_lock final : public lock_handle {
public:
    explicit posix_lock(int fd) : fd_(fd) {}
    ~posix_lock() override { ::close(fd_); }  // closing releases the flock

private:
    int fd_;
};

std::string read_pid(int fd) {
    char buf[32] = {};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return "unknown (a reader)";
    std::string pid(buf, static_cast<std::size_t>(n));
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == '\0')) pid.pop_back();
    return pid.empty() ? "unknown (a reader)" : pid;
}

class posix_env_impl final : public env {
public:
    std::unique_ptr<file> open(const std::string& path, open_mode mode, mode_t create_mode) override {
        int flags = O_CLOEXEC;
        switch (mode) {
        case open_mode::read_only: flags |= O_RDONLY; break;
        case open_mode::read_write: flags |= O_RDWR; break;
        case open_mode::create_new: flags |= O_RDWR | O_CREAT | O_EXCL; break;
        }
        int fd = ::open(path.c_str(), flags, create_mode);
        if (fd < 0) throw_system_error("open", path, errno);
        return std::make_unique<posix_file>(fd, path);
    }

    bool exists(const std::string& path) override {
        struct stat st;
        if (::stat(path.c_str(), &st) == 0) return true;
        if (errno == ENOENT) return false;
        throw_system_error("stat", path, errno);
    }

    void rename(const std::string& from, const std::string& to) override {
        if (::rename(from.c_str(), to.c_str()) != 0) throw_system_error("rename", from, errno, "to " + to);
    }

    void remove(const std::string& path) override {
        if (::unlink(path.c_str()) != 0 && errno != ENOENT) throw_system_error("unlink", path, errno);
    }

    void sync_dir_of(const std::string& path) override {
        auto slash = path.rfind('/');
        std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
        int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) throw_system_error("open", dir, errno, "to sync the directory");
        int rc = ::fsync(fd);
        int err = errno;
        ::close(fd);
        if (rc != 0) throw_system_error("fsync", dir, err);
    }

    std::unique_ptr<lock_handle> lock(const std::string& lock_path, bool exclusive, mode_t create_mode) override {
        int fd = ::open(lock_path.c_str(), (exclusive ? O_RDWR | O_CREAT : O_RDONLY) | O_CLOEXEC, create_mode);
        if (fd < 0 && !exclusive && errno == ENOENT) return std::make_unique<lock_handle>();
        if (fd < 0) throw_system_error("open", lock_path, errno, "the store's lock file");
        if (::flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
            int err = errno;
            // The file names the last writer; if a shared lock can be had, the
            // holders now are readers, and that writer may be long gone.
            bool readers = exclusive && err == EWOULDBLOCK && ::flock(fd, LOCK_SH | LOCK_NB) == 0;
            std::string holder = readers ? "" : read_pid(fd);
            if (readers) {
                ::close(fd);
                throw error(errc::locked, "store is open read-only by other processes (lock file " + lock_path +
                                              "); a writer must wait until they close it");
            }
            ::close(fd);
            if (err == EWOULDBLOCK)
                throw error(errc::locked, "store is locked by process " + holder + " (lock file " + lock_path + ")");
            throw_system_error("flock", lock_path, err);
        }
        if (exclusive) {
            // The pid is only a hint for the message a second opener gets; the flock is the lock.
            std::string pid = std::to_string(::getpid()) + "\n";
            if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
                int err = errno;
                ::close(fd);
                throw_system_error("write", lock_path, err, "recording the lock holder's pid");
            }
        }
        return std::make_unique<posix_lock>(fd);
    }
};

}  // namespace

env& posix_env() {
    static posix_env_impl instance;
    return instance;
}

}  // namespace steppe::storage
