// The reader table (reader_table.hpp): making and mapping NAME-shm, the
// writer's side (publish, checkpoint scope, the look at the slots) and a
// reader's (its slot, its snapshot).
#include "storage/reader_table.hpp"

#include <steppe/error.hpp>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>

#include "common/shared_files.hpp"
#include "common/sigsafe.hpp"
#include "common/system_error.hpp"
#include "storage/io.hpp"

namespace steppe::storage {

namespace {

// Every shared word is read and written as a sequentially consistent atomic
// (reader_table.hpp says why that order matters).
std::atomic_ref<std::uint64_t> word(std::uint64_t& w) { return std::atomic_ref<std::uint64_t>(w); }

// The sequence lock's low 32 bits, the word wait_for_publish sleeps on.
std::uint32_t& futex_word_of(std::uint64_t& seq) {
    static_assert(std::endian::native == std::endian::little);
    return *reinterpret_cast<std::uint32_t*>(&seq);
}

reader_table_header& header_of(void* memory) { return *static_cast<reader_table_header*>(memory); }

reader_slot& slot_of(void* memory, std::uint32_t i) {
    return static_cast<reader_slot*>(static_cast<void*>(static_cast<char*>(memory) + reader_slots_offset))[i];
}

off_t lock_byte(std::uint32_t slot) { return static_cast<off_t>(reader_slots_offset + slot * sizeof(reader_slot)); }

struct flock slot_lock(std::uint32_t slot, short type) {
    struct flock fl {};
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = lock_byte(slot);
    fl.l_len = 1;
    return fl;
}

bool usable(int fd) {
    struct stat st;
    if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < reader_table_bytes) return false;
    reader_table_header h{};
    if (::pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) return false;
    return std::memcmp(h.magic, reader_table_magic, sizeof h.magic) == 0 && h.version == reader_table_version &&
           h.slots == reader_slots;
}

// A new table, whole before its name appears.
int make_table(const std::string& path, mode_t mode) {
    std::string temp = path + "-new";
    ::unlink(temp.c_str());
    int fd = ::open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) common::throw_system_error("open", errno, temp, "making the store's reader table");
    std::vector<char> bytes(reader_table_bytes);
    reader_table_header h{};
    std::memcpy(h.magic, reader_table_magic, sizeof h.magic);
    h.version = reader_table_version;
    h.slots = reader_slots;
    if (::getrandom(&h.key, sizeof h.key, 0) != sizeof h.key) h.key = static_cast<std::uint64_t>(::getpid());
    h.key %= presence_keys;
    std::memcpy(bytes.data(), &h, sizeof h);
    // Each call named as it failed; a short write sets no errno (ENOSPC is
    // what the next write would say).
    const ssize_t wrote = ::pwrite(fd, bytes.data(), bytes.size(), 0);
    const char* call = nullptr;
    int err = 0;
    std::string where = temp;
    if (wrote < 0) {
        call = "write", err = errno;
    } else if (static_cast<std::size_t>(wrote) < bytes.size()) {
        call = "write (short)", err = ENOSPC;
    } else if (::rename(temp.c_str(), path.c_str()) != 0) {
        call = "rename", err = errno, where = temp + " to " + path;
    }
    if (call) {
        ::close(fd);
        ::unlink(temp.c_str());
        common::throw_system_error(call, err, where, "making the store's reader table");
    }
    return fd;
}

}  // namespace

reader_table::reader_table(std::string path, int fd, void* memory)
    : path_(std::move(path)), fd_(fd), memory_(memory) {
    std::error_code ec;  // absolute now: a chdir later must not make another file look like this one's replacement
    absolute_path_ = std::filesystem::absolute(path_, ec).string();
    if (ec) absolute_path_ = path_;
    common::note_shared_file(memory_, reader_table_bytes, path_.c_str());
}

// A child forked from the reader (whose copy of the handle a destructor or
// close ends) shares the slot's and the presence lock's open file
// descriptions: closing its descriptors leaves the parent's locks held, but
// a pid of 0 in the slot would tell the writer no reader is there
// (first_reader_not_at skips such slots unlocked) and let a checkpoint
// overwrite the parent's snapshot. Only the process that claimed the slot
// clears it.
reader_table::~reader_table() {
    if (slot_ >= 0 && ::getpid() == claimer_) word(slot_of(memory_, static_cast<std::uint32_t>(slot_)).pid).store(0);
    common::forget_shared_file(memory_);
    ::munmap(memory_, reader_table_bytes);
    ::close(fd_);  // lets go of the slot's lock (the last descriptor of its open file description does)
    if (store_fd_ >= 0) ::close(store_fd_);  // and of the presence lock
}

void reader_table::open_store_file(const std::string& store_path) {
    store_fd_ = open_regular(store_path, O_RDONLY);
    if (store_fd_ < 0) common::throw_system_error("open", errno, store_path, "for the reader table's locks");
}

void reader_table::lock_presence() {
    struct flock fl {};
    fl.l_type = F_RDLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = static_cast<off_t>(presence_base + header_of(memory_).key);
    fl.l_len = 1;
    if (::fcntl(store_fd_, F_OFD_SETLK, &fl) != 0)
        common::throw_system_error("fcntl(F_OFD_SETLK)", errno, path_, "a reader's lock on the main file");
}

// Whether NAME-shm is now another file than the one mapped here: another
// program copied it and renamed the copy over it (as rsync or an editor
// saves). Readers that opened since registered in the copy, which this
// writer never looks at. A table removed from the path is no such risk: a
// reader finds none and takes the store's lock, which the writer holds.
bool reader_table::replaced_at_path() const {
    struct stat at_path {}, mapped {};
    if (::stat(absolute_path_.c_str(), &at_path) != 0) return false;
    if (::fstat(fd_, &mapped) != 0) return true;  // cannot tell: assume the worst
    return at_path.st_dev != mapped.st_dev || at_path.st_ino != mapped.st_ino;
}

// A lock on the main file's presence range outside this table's own byte.
bool reader_table::readers_by_other_name() const {
    std::uint64_t key = header_of(memory_).key;
    std::pair<std::uint64_t, std::uint64_t> ranges[2] = {{presence_base, key},
                                                        {presence_base + key + 1, presence_keys - key - 1}};
    for (auto [start, length] : ranges) {
        if (length == 0) continue;
        struct flock fl {};
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        fl.l_start = static_cast<off_t>(start);
        fl.l_len = static_cast<off_t>(length);
        if (::fcntl(store_fd_, F_OFD_GETLK, &fl) != 0)
            common::throw_system_error("fcntl(F_OFD_GETLK)", errno, path_, "looking for readers by another name");
        if (fl.l_type != F_UNLCK) return true;
    }
    return false;
}

std::unique_ptr<reader_table> reader_table::map(const std::string& path, int fd) {
    void* memory = ::mmap(nullptr, reader_table_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (memory == MAP_FAILED) {
        int err = errno;
        ::close(fd);
        common::throw_system_error("mmap", err, path, "the store's reader table");
    }
    return std::unique_ptr<reader_table>(new reader_table(path, fd, memory));
}

std::unique_ptr<reader_table> reader_table::for_writer(const std::string& store_path, mode_t mode, bool make) {
    std::string path = store_path + "-shm";
    int fd = open_regular(path, O_RDWR);
    if (fd < 0 && errno != ENOENT) common::throw_system_error("open", errno, path, "the store's reader table");
    if (fd >= 0 && !usable(fd)) {
        ::close(fd);
        fd = -1;
    }
    if (fd < 0 && !make) return nullptr;
    if (fd < 0) fd = make_table(path, mode);
    std::unique_ptr<reader_table> t = map(path, fd);
    t->open_store_file(store_path);
    return t;
}

std::unique_ptr<reader_table> reader_table::for_reader(const std::string& store_path, std::string& why) {
    std::string path = store_path + "-shm";
    int fd = open_regular(path, O_RDWR);
    if (fd < 0) {
        // No table, or one this reader may not write its slot in: it reads
        // the way readers did before tables (shared flocks).
        if (errno == ENOENT) {
            why = "there is no reader table " + path + " (a writer still opening a store that had none: try "
                  "again; or deleted since the writer opened the store, which makes it again at its next open)";
            return nullptr;
        }
        if (errno == EACCES || errno == EROFS || errno == EPERM) {
            why = "this process may not write its slot in the reader table " + path + " (" +
                  std::strerror(errno) + "; a reader needs write permission on it)";
            return nullptr;
        }
        common::throw_system_error("open", errno, path, "the store's reader table");
    }
    if (!usable(fd)) {
        ::close(fd);
        why = path + " is not a reader table of this version (damaged, emptied, or made by another program or "
                     "another steppe version); a writer makes a new one when it opens the store (if one is opening "
                     "it now, try again)";
        return nullptr;
    }
    std::unique_ptr<reader_table> t = map(path, fd);
    t->claim_slot();
    t->open_store_file(store_path);
    t->lock_presence();
    return t;
}

void reader_table::claim_slot() {
    for (std::uint32_t i = 0; i < reader_slots; ++i) {
        struct flock fl = slot_lock(i, F_WRLCK);
        if (::fcntl(fd_, F_OFD_SETLK, &fl) == 0) {
            slot_ = static_cast<int>(i);
            claimer_ = ::getpid();
            reader_slot& mine = slot_of(memory_, i);
            word(mine.generation).store(0);  // registering: no snapshot yet
            word(mine.pid).store(static_cast<std::uint64_t>(::getpid()));
            return;
        }
        if (errno != EAGAIN && errno != EACCES)
            common::throw_system_error("fcntl(F_OFD_SETLK)", errno, path_, "claiming reader slot " + std::to_string(i));
    }
    throw error(errc::locked, path_ + ": all " + std::to_string(reader_slots) +
                                  " reader slots are held by live readers; close one and open again");
}

bool reader_table::slot_live(std::uint32_t i) const {
    struct flock fl = slot_lock(i, F_WRLCK);
    if (::fcntl(fd_, F_OFD_GETLK, &fl) != 0)
        common::throw_system_error("fcntl(F_OFD_GETLK)", errno, path_, "looking at reader slot " + std::to_string(i));
    return fl.l_type != F_UNLCK;
}

reader_slot reader_table::read_slot(std::uint32_t i) const {
    reader_slot& s = slot_of(memory_, i);
    return {word(s.pid).load(), word(s.generation).load(), word(s.log_end).load(), word(s.txn).load()};
}

// --- the writer ----------------------------------------------------------

void reader_table::adopt(const snapshot& header_state, std::uint64_t checkpointed_gen) {
    reader_table_header& h = header_of(memory_);
    // A writer killed inside publish or a checkpoint left the lock or the
    // epoch odd; nobody else writes them.
    if (std::uint64_t q = word(h.seq).load(); q & 1) word(h.seq).store(q + 1);
    if (std::uint64_t e = word(h.checkpoint_epoch).load(); e & 1) word(h.checkpoint_epoch).store(e + 1);
    word(h.writer_pid).store(static_cast<std::uint64_t>(::getpid()));
    word(h.checkpointed_gen).store(checkpointed_gen);
    snapshot old = read_published();
    // The old snapshot stays only if it speaks of the log the header expects
    // (the writer's recovery then finds at least its commit).
    if (old.store_id[0] != header_state.store_id[0] || old.store_id[1] != header_state.store_id[1] ||
        old.generation != header_state.generation || old.salt != header_state.salt)
        publish(header_state);
}

void reader_table::publish(const snapshot& s) {
    reader_table_header& h = header_of(memory_);
    word(h.seq).fetch_add(1);
    snapshot& p = h.published;
    word(p.store_id[0]).store(s.store_id[0]);
    word(p.store_id[1]).store(s.store_id[1]);
    word(p.generation).store(s.generation);
    word(p.salt).store(s.salt);
    word(p.log_end).store(s.log_end);
    word(p.txn).store(s.txn);
    word(h.seq).fetch_add(1);
    common::futex_wake_all_shared(futex_word_of(h.seq));  // readers in wait_for_publish
}

void reader_table::publish_checkpointed(std::uint64_t generation) {
    word(header_of(memory_).checkpointed_gen).store(generation);
}

void reader_table::begin_checkpoint() { word(header_of(memory_).checkpoint_epoch).fetch_add(1); }
void reader_table::end_checkpoint() { word(header_of(memory_).checkpoint_epoch).fetch_add(1); }

std::optional<reader_info> reader_table::first_reader_not_at(std::uint64_t generation, std::uint64_t log_end) const {
    if (replaced_at_path()) return reader_info{0, 0, 0, 0, false, true};
    if (readers_by_other_name()) return reader_info{0, 0, 0, 0, true};
    // The slot's words first, the lock (a system call) only for a slot that
    // could hold the checkpoint back. Skipped without one: a slot at the
    // newest commit, and one with pid 0, which no reader holds: a claim
    // stores the pid before its reader reads the epoch to take a snapshot,
    // so a reader whose pid this look misses sees the epoch this checkpoint
    // bumped and takes the newest commit (the protocol above).
    for (std::uint32_t i = 0; i < reader_slots; ++i) {
        reader_slot s = read_slot(i);
        if (s.pid == 0 || (s.generation == generation && s.log_end == log_end)) continue;
        if (slot_live(i)) return reader_info{s.pid, s.generation, s.log_end, s.txn};
    }
    return std::nullopt;
}

std::vector<reader_info> reader_table::live_readers() const {
    std::vector<reader_info> out;
    for (std::uint32_t i = 0; i < reader_slots; ++i) {
        if (!slot_live(i)) continue;
        reader_slot s = read_slot(i);
        out.push_back({s.pid, s.generation, s.log_end, s.txn});
    }
    return out;
}

// --- a reader ------------------------------------------------------------

// Under the sequence lock. A writer killed inside publish leaves it odd
// until the next writer adopts the table; the snapshot is unknown until
// then (throws locked: the caller reads without the table).
snapshot reader_table::read_published() const {
    reader_table_header& h = header_of(memory_);
    auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    for (;;) {
        std::uint64_t q = word(h.seq).load();
        if (!(q & 1)) {
            snapshot s;
            snapshot& p = h.published;
            s.store_id[0] = word(p.store_id[0]).load();
            s.store_id[1] = word(p.store_id[1]).load();
            s.generation = word(p.generation).load();
            s.salt = word(p.salt).load();
            s.log_end = word(p.log_end).load();
            s.txn = word(p.txn).load();
            if (word(h.seq).load() == q) return s;
        }
        if (std::chrono::steady_clock::now() > give_up)
            throw error(errc::locked, path_ + ": the writer's last published snapshot was left half written (the "
                                              "writer died while publishing a commit)");
        ::sched_yield();
    }
}

snapshot reader_table::register_snapshot() {
    reader_table_header& h = header_of(memory_);
    reader_slot& mine = slot_of(memory_, static_cast<std::uint32_t>(slot_));
    for (;;) {
        std::uint64_t before = word(h.checkpoint_epoch).load();
        snapshot s = read_published();
        word(mine.generation).store(s.generation);
        word(mine.log_end).store(s.log_end);
        word(mine.txn).store(s.txn);
        if (word(h.checkpoint_epoch).load() == before) return s;
    }
}

std::optional<snapshot> reader_table::wait_for_publish(const snapshot& seen, std::chrono::milliseconds timeout) const {
    reader_table_header& h = header_of(memory_);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        // Taken before the look: a publish after it changes the word, and
        // the futex then does not sleep.
        const auto seq = static_cast<std::uint32_t>(word(h.seq).load());
        try {
            if (snapshot now = read_published(); now != seen) return now;
        } catch (const error& e) {  // a writer died mid-publish: nothing new until the next writer
            if (e.code() != errc::locked) throw;
        }
        const auto left = deadline - std::chrono::steady_clock::now();
        if (left <= std::chrono::steady_clock::duration::zero()) return std::nullopt;
        // Slices of at most 100 ms: a writer killed between its commit and
        // the wake leaves no sleeper for long.
        const auto slice = std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(100)));
        timespec ts{static_cast<time_t>(slice.count() / 1'000'000'000), static_cast<long>(slice.count() % 1'000'000'000)};
        common::futex_wait_shared(futex_word_of(h.seq), seq, &ts);
    }
}

std::uint64_t reader_table::checkpointed_gen() const noexcept {
    return word(header_of(memory_).checkpointed_gen).load();
}

std::uint64_t reader_table::checkpoint_epoch() const noexcept {
    return word(header_of(memory_).checkpoint_epoch).load();
}

}  // namespace steppe::storage
