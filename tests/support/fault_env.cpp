#include "support/fault_env.hpp"

#include "common/system_error.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <random>

namespace steppe::test {

using storage::posix_env;

namespace {

// Applies the first `keep` bytes of `w` (all of a truncation, when kept) to `image`.
void apply(std::vector<std::byte>& image, const fault_env::pending_write& w, std::size_t keep) {
    if (w.truncate) {
        image.resize(w.offset);
        return;
    }
    if (image.size() < w.offset + keep) image.resize(w.offset + keep);
    std::copy_n(w.data.begin(), keep, image.begin() + static_cast<long>(w.offset));
}

// How much of unsynced write `w` (the last of its file or not) reaches the
// disk in a power loss of kind `mode`; a truncation is all or nothing.
std::size_t kept_bytes(loss mode, const fault_env::pending_write& w, bool last, std::mt19937_64& rng) {
    const std::size_t all = w.truncate ? 1 : w.data.size();
    const auto torn = [&] {
        const auto r = rng();
        return w.truncate ? all : std::min(all, (r % (all / 512 + 1)) * 512);
    };
    switch (mode) {
    case loss::keep_all: return all;
    case loss::drop_all: return 0;
    case loss::random_subset: return rng() % 2 ? all : 0;
    case loss::torn: return last ? torn() : all;
    case loss::random_torn: {
        const auto r = rng() % 3;
        return r == 0 ? 0 : r == 1 ? all : torn();
    }
    }
    return all;
}

}  // namespace

const char* to_string(loss how) {
    switch (how) {
    case loss::keep_all: return "power loss, all unsynced writes kept";
    case loss::drop_all: return "power loss, all unsynced writes lost";
    case loss::random_subset: return "power loss, a random subset of unsynced writes kept";
    case loss::torn: return "power loss, last unsynced write torn";
    case loss::random_torn: return "power loss, unsynced writes kept, lost or torn at random";
    }
    return "?";
}

class fault_file final : public storage::file {
public:
    fault_file(fault_env& env, std::unique_ptr<storage::file> real, fault_env::file_state& state)
        : env_(env), real_(std::move(real)), state_(state) {}

    std::size_t read_at(std::uint64_t offset, std::span<std::byte> out) override { return real_->read_at(offset, out); }
    long read_at_nothrow(std::uint64_t offset, std::byte* out, std::size_t size) noexcept override {
        return real_->read_at_nothrow(offset, out, size);
    }
    long read_cached_nothrow(std::uint64_t offset, std::byte* out, std::size_t size) noexcept override {
        return real_->read_cached_nothrow(offset, out, size);
    }
    void write_at(std::uint64_t offset, std::span<const std::byte> data) override {
        env_.before_call(path(), "pwrite");
        env_.load_durable(path(), state_);
        real_->write_at(offset, data);
        state_.pending.push_back({offset, {data.begin(), data.end()}});
    }
    void sync() override {
        // Durability is simulated: the durable image below is what survives
        // power_loss(), so the real fdatasync is not needed (and would be slow).
        env_.before_call(path(), "fdatasync");
        for (auto& w : state_.pending) apply(state_.durable, w, w.data.size());
        state_.pending.clear();
        if (env_.real_sync_) real_->sync();
    }
    void truncate(std::uint64_t size) override {
        env_.before_call(path(), "ftruncate");
        env_.load_durable(path(), state_);
        real_->truncate(size);
        state_.pending.push_back({size, {}, true});
    }
    std::uint64_t size() override { return real_->size(); }
    const std::string& path() const override { return real_->path(); }

private:
    fault_env& env_;
    std::unique_ptr<storage::file> real_;
    fault_env::file_state& state_;
};

// The store's lock, with locking the main file an I/O call like the others.
class fault_lock final : public storage::lock_handle {
public:
    fault_lock(fault_env& env, std::unique_ptr<storage::lock_handle> real, std::string path)
        : env_(env), real_(std::move(real)), path_(std::move(path)) {}
    void lock_store_file() override {
        env_.before_call(path_, "flock");
        real_->lock_store_file();
    }
    bool writer_beside() const override { return real_->writer_beside(); }

private:
    fault_env& env_;
    std::unique_ptr<storage::lock_handle> real_;
    std::string path_;
};

fault_env::fault_env() = default;
fault_env::~fault_env() = default;

void fault_env::before_call(const std::string& path, const char* call) {
    ++calls_;
    if (kill_countdown_ >= 0 && kill_countdown_-- == 0) kill_now(kill_loss_, kill_seed_);
    if (crash_countdown_ >= 0 && crash_countdown_-- == 0) throw simulated_crash{};
    if (fail_countdown_ >= 0 && (fail_countdown_ == 0 || fail_persistent_)) {
        if (fail_countdown_ == 0) {
            if (!fail_persistent_) fail_countdown_ = -1;
            common::throw_system_error(call, fail_errno_, path, "injected fault");
        }
    }
    if (fail_countdown_ > 0) --fail_countdown_;
}

// A file is read only before its first change: one that is only read (most
// of a reader's) costs nothing, and is left alone by power_loss().
void fault_env::load_durable(const std::string& path, file_state& state) {
    if (state.loaded) return;
    state.loaded = true;
    if (!posix_env().exists(path)) return;
    auto f = posix_env().open(path, storage::open_mode::read_only, 0600);
    state.durable.resize(f->size());
    f->read_at(0, state.durable);
}

std::unique_ptr<storage::file> fault_env::open(const std::string& path, storage::open_mode mode, mode_t create_mode) {
    const bool create = mode == storage::open_mode::create_new;
    if (create) before_call(path, "create");
    auto real = posix_env().open(path, mode, create_mode);
    if (create) files_.erase(path);
    file_state& state = files_[path];
    if (create) state.loaded = true;  // empty, and durable so (creates are)
    return std::make_unique<fault_file>(*this, std::move(real), state);
}

bool fault_env::exists(const std::string& path) { return posix_env().exists(path); }

void fault_env::rename(const std::string& from, const std::string& to) {
    before_call(from, "rename");
    posix_env().rename(from, to);
    auto node = files_.extract(from);
    files_.erase(to);
    if (!node.empty()) {
        node.key() = to;
        files_.insert(std::move(node));
    }
}

void fault_env::remove(const std::string& path) {
    before_call(path, "unlink");
    posix_env().remove(path);
    files_.erase(path);
}

void fault_env::sync_dir_of(const std::string& path) {
    before_call(path, "fsync");
    posix_env().sync_dir_of(path);
}

std::unique_ptr<storage::lock_handle> fault_env::lock(const std::string& path, storage::lock_kind kind, mode_t mode,
                                                     std::chrono::milliseconds wait) {
    before_call(path + "-lock", "flock");
    return std::make_unique<fault_lock>(*this, posix_env().lock(path, kind, mode, wait), path);
}

std::size_t fault_env::unsynced_writes() const {
    std::size_t n = 0;
    for (auto& [path, state] : files_) n += state.pending.size();
    return n;
}

// Each file is rewritten in place, as a disk would leave it (recreated if it
// is gone: a test that threw simulated_crash ran destructors a real crash
// would not have).
void fault_env::power_loss(loss mode, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (auto& [path, state] : files_) {
        if (!state.loaded) continue;  // never changed: the disk holds what it did
        std::vector<std::byte> image = state.durable;
        for (std::size_t i = 0; i < state.pending.size(); ++i) {
            const auto& w = state.pending[i];
            if (std::size_t keep = kept_bytes(mode, w, i + 1 == state.pending.size(), rng)) apply(image, w, keep);
        }
        const bool there = posix_env().exists(path);
        auto f = posix_env().open(path, there ? storage::open_mode::read_write : storage::open_mode::create_new, 0600);
        f->write_at(0, image);
        f->truncate(image.size());
        state.durable = std::move(image);
        state.pending.clear();
    }
}

// The process dies where it stands; what a power loss would leave is on
// the disk first. (The pause is never reached: SIGKILL cannot be caught.)
void fault_env::kill_now(std::optional<loss> how, std::uint64_t seed) {
    if (how) power_loss(*how, seed);
    ::kill(::getpid(), SIGKILL);
    for (;;) ::pause();
}

}  // namespace steppe::test
