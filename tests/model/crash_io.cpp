#include "crash_io.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <utility>
#include <vector>

namespace steppe_model::crash_io {
namespace {

using pwrite_fn = ssize_t (*)(int, const void*, size_t, off_t);
using sync_fn = int (*)(int);

template <class F>
F real(const char* name) {
    void* f = ::dlsym(RTLD_NEXT, name);
    if (!f) {
        static const char msg[] = "crash_io: dlsym(RTLD_NEXT) found no libc symbol\n";
        (void)!::write(2, msg, sizeof msg - 1);
        ::_exit(90);
    }
    F out;
    std::memcpy(&out, &f, sizeof out);
    return out;
}
pwrite_fn real_pwrite() {
    static pwrite_fn f = real<pwrite_fn>("pwrite");
    return f;
}
sync_fn real_fdatasync() {
    static sync_fn f = real<sync_fn>("fdatasync");
    return f;
}
sync_fn real_fsync() {
    static sync_fn f = real<sync_fn>("fsync");
    return f;
}

struct pending_write {
    std::uint64_t offset;
    std::vector<std::byte> data;
};
struct tracked_file {
    int fd;  // our own duplicate: keeps the inode (and its number) alive, and lets us rewrite it
    std::string path;
    std::vector<std::byte> durable;
    std::vector<pending_write> pending;
};
struct state {
    std::string dir;  // empty: not tracking
    std::map<std::pair<dev_t, ino_t>, int> known;  // inode -> index into files, or -1 (not ours)
    std::vector<tracked_file> files;
    long calls = 0;
    long countdown = -1;
    mode armed_mode = mode::kill;
    std::uint64_t seed = 0;
    bool real_sync = false;
};
state& st() {
    static state s;
    return s;
}

tracked_file* lookup(int fd) {
    state& s = st();
    if (s.dir.empty()) return nullptr;
    struct stat sb;
    if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) return nullptr;
    auto key = std::make_pair(sb.st_dev, sb.st_ino);
    if (auto it = s.known.find(key); it != s.known.end()) return it->second < 0 ? nullptr : &s.files[it->second];
    char link[64], target[PATH_MAX + 1];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = ::readlink(link, target, PATH_MAX);
    std::string path = n > 0 ? std::string(target, static_cast<std::size_t>(n)) : std::string();
    bool ours = path.size() > s.dir.size() + 1 && path.compare(0, s.dir.size() + 1, s.dir + "/") == 0 &&
                path.find('/', s.dir.size() + 1) == std::string::npos &&
                !(path.size() >= 5 && path.compare(path.size() - 5, 5, "-lock") == 0);
    if (!ours) {
        s.known[key] = -1;
        return nullptr;
    }
    tracked_file t;
    t.fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 64);
    t.path = path;
    t.durable.resize(static_cast<std::size_t>(sb.st_size));  // what is there now counts as durable
    std::size_t done = 0;
    while (done < t.durable.size()) {
        ssize_t r = ::pread(fd, t.durable.data() + done, t.durable.size() - done, static_cast<off_t>(done));
        if (r <= 0) break;
        done += static_cast<std::size_t>(r);
    }
    t.durable.resize(done);
    s.files.push_back(std::move(t));
    s.known[key] = static_cast<int>(s.files.size() - 1);
    return &s.files.back();
}

// Counts a tracked call; dies here if it is the armed one.
void before_call() {
    state& s = st();
    ++s.calls;
    if (s.countdown < 0) return;
    if (s.countdown == 0) crash_now(s.armed_mode, s.seed);
    --s.countdown;
}

}  // namespace

const char* to_string(mode m) {
    switch (m) {
    case mode::kill: return "kill -9";
    case mode::keep_all: return "power loss, all unsynced writes kept";
    case mode::drop_all: return "power loss, all unsynced writes lost";
    case mode::random_subset: return "power loss, a random subset of unsynced writes kept";
    case mode::torn: return "power loss, last unsynced write torn";
    case mode::random_torn: return "power loss, unsynced writes kept, lost or torn at random";
    case mode::count_: break;
    }
    return "?";
}

void track_directory(const std::string& dir) {
    state& s = st();
    s.dir = dir;
    const char* v = std::getenv("STEPPE_MODEL_REAL_FSYNC");
    s.real_sync = v && *v == '1';
}

void arm(long calls, mode m, std::uint64_t seed) {
    st().countdown = calls;
    st().armed_mode = m;
    st().seed = seed;
}
void disarm() { st().countdown = -1; }
long calls() { return st().calls; }

void crash_now(mode m, std::uint64_t seed) {
    state& s = st();
    if (m != mode::kill) {
        std::mt19937_64 rng(seed);
        for (tracked_file& f : s.files) {
            std::vector<std::byte> image = f.durable;
            for (std::size_t i = 0; i < f.pending.size(); ++i) {
                const pending_write& w = f.pending[i];
                std::size_t keep = w.data.size();
                auto torn_at = [&] { return std::min(keep, static_cast<std::size_t>(rng() % (keep / 512 + 1)) * 512); };
                switch (m) {
                case mode::keep_all: break;
                case mode::drop_all: keep = 0; break;
                case mode::random_subset: keep = rng() % 2 ? keep : 0; break;
                case mode::torn:
                    if (i + 1 == f.pending.size()) keep = torn_at();
                    break;
                case mode::random_torn: {
                    auto r = rng() % 3;
                    keep = r == 0 ? 0 : r == 1 ? keep : torn_at();
                    break;
                }
                default: break;
                }
                if (keep == 0) continue;
                if (image.size() < w.offset + keep) image.resize(w.offset + keep);
                std::copy_n(w.data.begin(), keep, image.begin() + static_cast<long>(w.offset));
            }
            std::size_t done = 0;
            while (done < image.size()) {
                ssize_t r = real_pwrite()(f.fd, image.data() + done, image.size() - done, static_cast<off_t>(done));
                if (r <= 0) break;
                done += static_cast<std::size_t>(r);
            }
            if (::ftruncate(f.fd, static_cast<off_t>(image.size())) != 0) {
                static const char msg[] = "crash_io: ftruncate failed while simulating a power loss\n";
                (void)!::write(2, msg, sizeof msg - 1);
            }
        }
    }
    ::kill(::getpid(), SIGKILL);
    for (;;) ::pause();
}

}  // namespace steppe_model::crash_io

using namespace steppe_model::crash_io;

extern "C" ssize_t pwrite(int fd, const void* buf, size_t n, off_t offset) {
    tracked_file* f = lookup(fd);
    if (!f) return real_pwrite()(fd, buf, n, offset);
    before_call();
    ssize_t r = real_pwrite()(fd, buf, n, offset);
    if (r > 0) {
        auto b = static_cast<const std::byte*>(buf);
        f->pending.push_back({static_cast<std::uint64_t>(offset), std::vector<std::byte>(b, b + r)});
    }
    return r;
}

extern "C" int fdatasync(int fd) {
    tracked_file* f = lookup(fd);
    if (!f) return real_fdatasync()(fd);
    before_call();
    for (const pending_write& w : f->pending) {
        if (f->durable.size() < w.offset + w.data.size()) f->durable.resize(w.offset + w.data.size());
        std::copy(w.data.begin(), w.data.end(), f->durable.begin() + static_cast<long>(w.offset));
    }
    f->pending.clear();
    return st().real_sync ? real_fdatasync()(fd) : 0;
}

extern "C" int fsync(int fd) {
    if (tracked_file* f = lookup(fd)) {  // steppe fsyncs only directories today; treat a file like fdatasync
        (void)f;
        return fdatasync(fd);
    }
    return real_fsync()(fd);
}
