#include "support/fault_env.hpp"

#include "common/system_error.hpp"

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

}  // namespace

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
        real_->write_at(offset, data);
        state_.pending.push_back({offset, {data.begin(), data.end()}});
    }
    void sync() override {
        // Durability is simulated: the durable image below is what survives
        // power_loss(), so the real fdatasync is not needed (and would be slow).
        env_.before_call(path(), "fdatasync");
        for (auto& w : state_.pending) apply(state_.durable, w, w.data.size());
        state_.pending.clear();
    }
    void truncate(std::uint64_t size) override {
        env_.before_call(path(), "ftruncate");
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

fault_env::fault_env() = default;
fault_env::~fault_env() = default;

void fault_env::before_call(const std::string& path, const char* call) {
    ++calls_;
    if (crash_countdown_ >= 0 && crash_countdown_-- == 0) throw simulated_crash{};
    if (fail_countdown_ >= 0 && (fail_countdown_ == 0 || fail_persistent_)) {
        if (fail_countdown_ == 0) {
            if (!fail_persistent_) fail_countdown_ = -1;
            common::throw_system_error(call, fail_errno_, path, "injected fault");
        }
    }
    if (fail_countdown_ > 0) --fail_countdown_;
}

fault_env::file_state& fault_env::state_of(const std::string& path) {
    auto [it, fresh] = files_.try_emplace(path);
    if (fresh && posix_env().exists(path)) {
        auto f = posix_env().open(path, storage::open_mode::read_only, 0600);
        it->second.durable.resize(f->size());
        f->read_at(0, it->second.durable);
    }
    return it->second;
}

std::unique_ptr<storage::file> fault_env::open(const std::string& path, storage::open_mode mode, mode_t create_mode) {
    if (mode == storage::open_mode::create_new) files_.erase(path);
    auto real = posix_env().open(path, mode, create_mode);
    return std::make_unique<fault_file>(*this, std::move(real), state_of(path));
}

bool fault_env::exists(const std::string& path) { return posix_env().exists(path); }

void fault_env::rename(const std::string& from, const std::string& to) {
    posix_env().rename(from, to);
    auto node = files_.extract(from);
    files_.erase(to);
    if (!node.empty()) {
        node.key() = to;
        files_.insert(std::move(node));
    }
}

void fault_env::remove(const std::string& path) {
    posix_env().remove(path);
    files_.erase(path);
}

void fault_env::sync_dir_of(const std::string& path) { posix_env().sync_dir_of(path); }

std::unique_ptr<storage::lock_handle> fault_env::lock(const std::string& path, bool exclusive, mode_t mode) {
    return posix_env().lock(path, exclusive, mode);
}

std::size_t fault_env::unsynced_writes() const {
    std::size_t n = 0;
    for (auto& [path, state] : files_) n += state.pending.size();
    return n;
}

void fault_env::power_loss(loss mode, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (auto& [path, state] : files_) {
        std::vector<std::byte> image = state.durable;
        for (std::size_t i = 0; i < state.pending.size(); ++i) {
            const auto& w = state.pending[i];
            bool kept = true;
            std::size_t keep = w.data.size();
            switch (mode) {
            case loss::keep_all: break;
            case loss::drop_all: kept = false; break;
            case loss::random_subset: kept = rng() % 2; break;
            case loss::torn:  // the last write stops at a random 512-byte sector
                if (i + 1 == state.pending.size()) keep = std::min(keep, (rng() % (keep / 512 + 1)) * 512);
                kept = keep > 0 || w.truncate;
                break;
            }
            if (kept) apply(image, w, keep);
        }
        posix_env().remove(path);
        auto f = posix_env().open(path, storage::open_mode::create_new, 0600);
        f->write_at(0, image);
        state.durable = std::move(image);
        state.pending.clear();
    }
}

}  // namespace steppe::test
