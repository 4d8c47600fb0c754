// The storage manager. Divisions, in order:
//   1. helpers (randomness, header validation)
//   2. open: create, lock, headers, checksum groups, log replay; a reader
//      beside the writer (its snapshot from the reader table), the writer's
//      side of the table
//   3. reads
//   4. commit
//   5. checkpoint and log reset
//   6. describe and check
#include "storage/file_store.hpp"


#include <steppe/error.hpp>

#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "common/hex.hpp"
#include "common/sigsafe.hpp"
#include "common/system_error.hpp"
#include "storage/checksum.hpp"
#include "storage/file_records.hpp"
#include "storage/page_diff.hpp"
#include "storage/wal_format.hpp"

namespace steppe::storage {

// 1. Helpers ---------------------------------------------------------------

namespace {

enum class slot_state { ok, no_magic, other_version, other_page_size, bad_checksum };

slot_state check_header_slot(const file_header& h) {
    if (std::memcmp(h.magic, header_magic, sizeof h.magic) != 0) return slot_state::no_magic;
    if (h.version != format_version) return slot_state::other_version;
    if (h.crc != struct_crc(h)) return slot_state::bad_checksum;
    if (h.page_size != page_size) return slot_state::other_page_size;
    return slot_state::ok;
}

const char* describe_slot(slot_state s) {
    switch (s) {
    case slot_state::ok: return "valid";
    case slot_state::no_magic: return "no steppe magic";
    case slot_state::other_version: return "another format version";
    case slot_state::other_page_size: return "another page size";
    case slot_state::bad_checksum: return "bad checksum";
    }
    return "?";
}

std::string version_note(std::uint32_t version) {
    if (version == 1)
        return " (format 1 logs could pass damage for a torn tail; open the store with the steppe that wrote it, "
               "copy its objects out, and load them into a new store)";
    return version > format_version ? " (written by a newer steppe: use that one)" : "";
}

bool newer(std::uint32_t a, std::uint32_t b) { return static_cast<std::int32_t>(a - b) > 0; }

bool all_zero(const std::byte* p, std::size_t n) {
    return std::all_of(p, p + n, [](std::byte b) { return b == std::byte{0}; });
}

bool checksum_page_valid(const checksum_page& p, std::uint64_t group) {
    return p.magic == checksum_page_magic && p.group == group && p.crc == struct_crc(p);
}

// The longest name a writable open may give a file: the reader table's
// temporary (reader_table.cpp; the same length as compaction's NAME.compact).
constexpr std::string_view longest_suffix = "-shm-new";

// A writable open makes files named NAME plus a suffix. A NAME with room
// for the shorter suffixes but not the longest failed with ENAMETOOLONG at
// NAME-shm-new, after NAME and NAME-wal were made, and so did every
// writable open after it: refused here, before anything is made.
void check_name_fits(const std::string& path) {
    const auto slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const std::size_t name_bytes = slash == std::string::npos ? path.size() : path.size() - slash - 1;
    errno = 0;
    long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);  // a missing directory: open says so
    if (name_max <= 0) name_max = NAME_MAX;
    if (name_bytes + longest_suffix.size() > static_cast<std::size_t>(name_max))
        throw error(errc::invalid_argument,
                    "store " + path + ": its file name is " + std::to_string(name_bytes) +
                        " bytes, but the store's files are named after it with up to " +
                        std::to_string(longest_suffix.size()) + " bytes more (NAME" + std::string(longest_suffix) +
                        ") and this file system allows " + std::to_string(name_max) +
                        " bytes a name: name the store with at most " +
                        std::to_string(static_cast<std::size_t>(name_max) - longest_suffix.size()) +
                        " bytes (nothing was made)");
    if (path.size() + longest_suffix.size() >= PATH_MAX)
        throw error(errc::invalid_argument, "store " + path + ": its path is " + std::to_string(path.size()) +
                                                " bytes, and the store's files need up to " +
                                                std::to_string(longest_suffix.size()) + " more within the system's " +
                                                std::to_string(PATH_MAX) + " (nothing was made)");
}

}  // namespace

// 2. Open ------------------------------------------------------------------

file_store::file_store(std::string path, const options& opts)
    : storage(std::move(path)), wal_path_(path_ + "-wal"), opts_(opts),
      io_(opts.io ? opts.io : &posix_env()) {}

file_store::~file_store() = default;

std::unique_ptr<file_store> file_store::open(const std::string& path, const options& opts) {
    if (opts.salvage && opts.read_only)
        throw error(errc::invalid_argument, path + ": salvaging a damaged log needs a writable open");
    if (opts.exclusive_create && (opts.read_only || !opts.create))
        throw error(errc::invalid_argument, path + ": exclusive_create needs a writable open with create");
    // By the real file's name, so that the log and the lock file are the real
    // store's whichever symlink it is opened by.
    std::unique_ptr<file_store> s(new file_store(resolve_store_path(path), opts));
    if (!opts.read_only) check_name_fits(s->path_);
    if (opts.read_only && s->open_beside_writer(false)) {
        s->opts_.after = nullptr;  // used by the open only
        return s;
    }
    s->opts_.after = nullptr;
    try {
        s->lock_ = s->io_->lock(s->path_, opts.read_only ? lock_kind::reader : lock_kind::writer, opts.file_mode,
                                opts.lock_timeout);
    } catch (const error& e) {
        // A writer that took the lock has made the reader table by now,
        // unless it is still opening a store that had none.
        if (!opts.read_only || e.code() != errc::locked) throw;
        if (s->open_beside_writer(true)) return s;
        if (s->beside_writer_refusal_locked_) throw error(errc::locked, s->beside_writer_refusal_);
        throw error(errc::locked, std::string(e.what()) + ". A reader opens beside a writer through the store's "
                                                          "reader table, and here it cannot: " +
                                      s->beside_writer_refusal_);
    }
    // Under the writer's lock, so the test and the creation are one step.
    const bool create = !s->io_->exists(s->path_);
    if (create && (!opts.create || opts.read_only)) throw error(errc::not_found, "store " + path + " does not exist");
    if (!create && opts.exclusive_create)
        throw error(errc::exists, "store " + path + " exists already (exclusive_create was asked for; nothing was "
                                                    "changed)");
    // What a creation finds there already is not its own to remove (as posix_lock leaves a log it found).
    if (create)
        for (const std::string& f : {s->path_, s->wal_path_, s->path_ + "-shm"})
            if (!s->io_->exists(f)) s->made_by_open_.push_back(f);
    auto open_locked = [&] {
        if (create) s->create_files();
        s->lock_->lock_store_file();  // the file itself: a hard link cannot make a second writer
        s->main_ = s->io_->open(s->path_, opts.read_only ? open_mode::read_only : open_mode::read_write,
                                opts.file_mode);
        s->around_.set_limit(s->main_->device_read_ahead());
        s->plan_main_file_reads();
        s->ask_for_the_log();
        s->load_header();
        s->load_checksums();
        s->load_mark();
        s->open_wal();  // writes only a log that was missing (no reader reads one)
        // Before recovery may reset the log. A missing table is made only once
        // the log is judged sound (no reader can be registered in a table that
        // is not there, and a refused open leaves no file behind), before the
        // checkpoint, which must see readers by other names (a hard link).
        if (!opts.read_only) s->adopt_reader_table(false);
        s->replay_wal();
        s->check_nothing_past_the_count();
        if (opts.read_only) return;
        if (!s->readers_) s->adopt_reader_table(true);
        s->publish();
        if (!s->missing_log_accepted_.empty()) return s->accept_missing_log();
        // A crash mid-checkpoint can leave a torn alternate header or checksum
        // slot; those are rewritten only by the next checkpoint, so do it now
        // (unless a reader holds an older snapshot: then the next one does).
        s->try_checkpoint();
    };
    try {
        open_locked();
    } catch (const error&) {
        // An open that made the store and then failed leaves no file (the
        // directory's sync after the rename, the reader table's temporary,
        // the checkpoint at open failed). The lock is still held, so no other
        // writer has seen the new store (a reader could only since its
        // first snapshot was published, and keeps its open files). Not on
        // a test's simulated crash, which is no steppe::error: a process
        // that dies cleans nothing up.
        s->remove_if_made_by_open();
        throw;
    }
    return s;
}

void file_store::remove_if_made_by_open() noexcept {
    readers_.reset();
    for (const std::string& f : made_by_open_) {
        try {
            io_->remove(f);
        } catch (const error&) {  // the open's own error says more; nothing better to do here
        }
    }
    made_by_open_.clear();
}

// How the main file is read, decided at open from its size
// (read_around::plan): small enough, asked for whole now.
void file_store::plan_main_file_reads() {
    const std::uint64_t bytes = main_->size();
    asked_whole_bytes_ = 0;
    if (!around_.plan(bytes, main_->device_read_ahead())) return;
    main_->will_need(0, bytes);
    asked_whole_bytes_ = bytes;
}

// A reader beside a writer (or after one): the snapshot the reader table
// publishes, registered in a slot before any file is read (invariant 5).
// false when there is no usable table or its snapshot does not fit the
// files (a store replaced since, a writer dead while publishing): the caller
// then reads the way readers did before tables, under shared flocks.
bool file_store::open_beside_writer(bool writer_holds_lock) {
    beside_writer_refusal_locked_ = false;
    try {
        readers_ = reader_table::for_reader(path_, beside_writer_refusal_);
    } catch (const error& e) {
        if (e.code() != errc::locked) throw;
        beside_writer_refusal_ = e.what();
        beside_writer_refusal_locked_ = true;
        return false;
    }
    if (!readers_) return false;
    beside_writer_refusal_ = "the writer moved its log into the main file during each of 100 tries to read its "
                             "snapshot (a checkpoint at every commit? try again)";
    try {
        lock_ = io_->lock(path_, lock_kind::snapshot, opts_.file_mode, opts_.lock_timeout);
        if (!io_->exists(path_)) throw error(errc::not_found, "store " + path_ + " does not exist");
        lock_->lock_store_file();
        main_ = io_->open(path_, open_mode::read_only, opts_.file_mode);
        around_.set_limit(main_->device_read_ahead());
        plan_main_file_reads();
        bool waited_for_publish = false;
        for (int attempt = 0; attempt < 100; ++attempt) {
            snapshot_ = readers_->register_snapshot();
            snapshot_fit fit = load_snapshot();
            if (fit == snapshot_fit::fits && commits_beyond_this_table()) {
                beside_writer_refusal_ = "the main file shows commits this table has not published: a writer is "
                                         "still opening the store (try again), or one opened it by another name (a "
                                         "hard link: open it by that name)";
                break;
            }
            if (fit == snapshot_fit::fits && !writer_holds_lock && log_goes_on_without_a_writer()) {
                beside_writer_refusal_ = "the log holds commits past the table's snapshot, and no writer holds the "
                                         "store (a power loss kept an older table)";
                break;
            }
            if (fit == snapshot_fit::fits) return true;
            if (fit == snapshot_fit::damaged && writer_holds_lock && !waited_for_publish) {
                // A writer still opening the store has not published its own
                // snapshot yet (the table names its predecessor's).
                waited_for_publish = true;
                (void)readers_->wait_for_publish(snapshot_, std::chrono::milliseconds(100));
                continue;
            }
            if (fit == snapshot_fit::damaged && writer_holds_lock) throw_published_commits_damaged();
            if (fit == snapshot_fit::stale || fit == snapshot_fit::damaged) {
                // Without a live writer the table may name commits a restored
                // copy or a power loss took away: the open under flocks judges
                // the log itself (judge_log).
                beside_writer_refusal_ = "its snapshot does not fit the files (the store was replaced since the "
                                         "table was written, or a writer is still opening it: try again)";
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    } catch (const error& e) {
        if (e.code() != errc::locked) throw;
        beside_writer_refusal_ = e.what();
        beside_writer_refusal_locked_ = true;
    }
    readers_.reset();
    lock_.reset();
    main_.reset();
    wal_.reset();
    return false;
}

// A commit the main file's mark shows durable that this name's table never
// published was made by a writer that opened the file by another name (a
// hard link): its log is that name's, so this table's snapshot is not the
// newest, and the open without the table reports the commits it cannot
// read (judge_log) instead of reading an older state. A writer by this name
// publishes a commit before it marks it, so the mark is read first.
bool file_store::commits_beyond_this_table() {
    load_mark();
    return mark_counts() && mark_.txn > txn_seq_ && readers_->published_txn() < mark_.txn;
}

// A table whose snapshot fits may still be older than the log: NAME-shm is
// never synced, so after a power loss it holds whatever its last writeback
// saved, commits behind the log, and the commit mark (also unsynced) can be
// as old (a tester's finding: readers, check and backup showed commit 2 of
// 5 that had returned). A writer publishes a commit before the next one
// starts, so a log that shows (examine_tail, as a writer's open judges
// it) a commit past the snapshot durable means the table is behind: the
// open under flocks then judges the whole log. Frames of one commit past
// it are a commit in flight (a live writer's, or one killed before it
// published), which the snapshot may leave out (promise 1: the one before),
// and a reader holding flocks would keep the next writer out. A writer that
// starts after the look finds this reader registered and keeps its
// snapshot's frames (invariant 5).
bool file_store::log_goes_on_without_a_writer() {
    if (lock_->writer_beside()) return false;
    // A snapshot of the main file alone (load_main_only) left the log unopened
    if (!wal_ && io_->exists(wal_path_)) wal_ = io_->open(wal_path_, open_mode::read_only, opts_.file_mode);
    return examine_tail(wal_end_).shown_txn > txn_seq_;
}

// The files as of the registered snapshot: the main file as its header
// says, then the snapshot's log up to its end. `moved`: the writer
// checkpointed that log meanwhile (the header now holds it: read again).
file_store::snapshot_fit file_store::load_snapshot() {
    load_header();
    const snapshot& s = snapshot_;
    if (std::memcmp(s.store_id, header_.store_id, sizeof header_.store_id) != 0) return snapshot_fit::stale;
    if (header_.checkpoint_gen >= s.generation) return load_main_only();
    if (header_.checkpoint_gen + 1 != s.generation || header_.next_wal_salt != s.salt) return snapshot_fit::stale;
    load_checksums();
    if (checksums_in_flux()) return snapshot_fit::moved;
    load_mark();
    wal_header_ = {};
    wal_header_.generation = s.generation;
    wal_header_.salt = s.salt;
    if (!wal_ && io_->exists(wal_path_)) wal_ = io_->open(wal_path_, open_mode::read_only, opts_.file_mode);
    if (!resume_after(s)) replay_frames(s.log_end);
    wal_needs_reset_ = wal_ && !log_header_is(s.generation, s.salt);  // damage check() names
    // Asked after the reads: a reset since may have cut the replay short
    // or rewritten the header.
    if (readers_->checkpointed_gen() >= s.generation) return snapshot_fit::moved;
    // A commit is published only once its frames are written, and marked
    // just after, so a replay short of the snapshot's end met damage if the
    // mark is at s.txn - 1 or later; a mark behind that shows files the
    // snapshot was not published over (a copy of the store put back, its
    // next writer still opening under the old table).
    if (wal_end_ < s.log_end && txn_seq_ < s.txn)
        return mark_counts() && mark_.txn + 1 >= s.txn ? snapshot_fit::damaged : snapshot_fit::stale;
    return wal_end_ == s.log_end && txn_seq_ == s.txn ? snapshot_fit::fits : snapshot_fit::stale;
}

// The log a live writer is using is damaged before commits it published:
// the reader cannot read them, and a wait for the lock would never end. The
// writer reads its newest page versions, which may all lie past the damage,
// so its next checkpoint may end it for readers.
void file_store::throw_published_commits_damaged() const {
    throw error(errc::corrupt,
                wal_path_ + ": the log is damaged at byte " + std::to_string(replay_stop_) + " (" +
                    replay_stop_reason_ + "), where commit " + std::to_string(txn_seq_ + 1) +
                    " should be. The writer using the store published commits up to " +
                    std::to_string(snapshot_.txn) + ", and this reader cannot read commits " +
                    std::to_string(txn_seq_ + 1) + " to " + std::to_string(snapshot_.txn) +
                    ". Readers can open again once the writer has checkpointed past the damage; if the store is "
                    "still refused once the writer has closed it, `steppe recover " + path_ +
                    "` opens it at commit " + std::to_string(txn_seq_) + ", the last one before the damage");
}

bool file_store::log_header_is(std::uint64_t generation, std::uint64_t salt) const {
    wal_header h{};
    std::size_t n = wal_->read_at(0, {reinterpret_cast<std::byte*>(&h), sizeof h});
    return n == sizeof h && std::memcmp(h.magic, wal_magic, sizeof h.magic) == 0 && h.crc == struct_crc(h) &&
           h.generation == generation && h.salt == salt;
}

// The snapshot's log was checkpointed: the main file is exactly the
// snapshot (a checkpoint copies the whole log, and only while every reader
// is at its end; the next one waits for this reader).
file_store::snapshot_fit file_store::load_main_only() {
    if (header_.checkpoint_gen != snapshot_.generation || header_.txn_seq != snapshot_.txn) return snapshot_fit::stale;
    load_checksums();
    if (checksums_in_flux()) return snapshot_fit::moved;
    load_mark();
    wal_index_.clear();
    wal_commits_ = 0;
    wal_header_ = {};
    wal_header_.generation = header_.checkpoint_gen + 1;
    wal_header_.salt = header_.next_wal_salt;
    wal_end_ = wal_frames_offset;
    return snapshot_fit::fits;
}

// A group whose slots both fail may be a group a running checkpoint writes
// for the first time (the other slot never written): read again after it.
bool file_store::checksums_in_flux() const {
    bool damaged = std::any_of(groups_.begin(), groups_.end(), [](const group_sums& g) { return g.slot == -2; });
    return damaged && (readers_->checkpoint_epoch() & 1);
}

// The writer's side of the table, taken over before recovery writes to the
// log: from now on readers at generations the header holds read them from
// the main file. `make`: make the table if it is missing or unusable.
void file_store::adopt_reader_table(bool make) {
    readers_ = reader_table::for_writer(path_, opts_.file_mode, make);
    if (!readers_) return;
    snapshot header_state{};
    std::memcpy(header_state.store_id, header_.store_id, sizeof header_.store_id);
    header_state.generation = header_.checkpoint_gen + 1;
    header_state.salt = header_.next_wal_salt;
    header_state.log_end = wal_frames_offset;
    header_state.txn = header_.txn_seq;
    readers_->adopt(header_state, header_.checkpoint_gen);
}

// The newest commit, for readers: its frames are written and durable.
void file_store::publish() {
    snapshot s{};
    std::memcpy(s.store_id, header_.store_id, sizeof header_.store_id);
    s.generation = wal_header_.generation;
    s.salt = wal_header_.salt;
    s.log_end = wal_end_;
    s.txn = txn_seq_;
    readers_->publish(s);
}

// Creation is atomic: the main file appears under its name (rename) only once
// it and its log are complete and durable.
void file_store::create_files() {
    std::string temp = path_ + "-new";
    io_->remove(temp);
    auto f = io_->open(temp, open_mode::create_new, opts_.file_mode);
    file_header h = new_store_header();
    h.crc = struct_crc(h);
    std::vector<std::byte> pages(3 * page_size);
    std::memcpy(pages.data(), &h, sizeof h);
    commit_mark m = make_mark(h.store_id, 1, 0, wal_frames_offset);
    std::memcpy(pages.data() + commit_mark_page * page_size, &m, sizeof m);
    f->write_at(0, pages);
    f->sync();

    header_ = h;
    io_->remove(wal_path_);
    wal_ = io_->open(wal_path_, open_mode::create_new, opts_.file_mode);
    reset_wal(1, h.next_wal_salt);
    wal_->sync();  // creation is always durable: a store must never be unopenable
    wal_.reset();
    io_->rename(temp, path_);
    io_->sync_dir_of(path_);
}

void file_store::load_header() {
    std::byte buf[2 * page_size] = {};
    std::size_t n = main_->read_at(0, buf);
    file_header slots[2];
    slot_state state[2];
    for (int i = 0; i < 2; ++i) {
        std::memcpy(&slots[i], buf + i * page_size, sizeof(file_header));
        state[i] = check_header_slot(slots[i]);  // a truncated file reads as zeros past its end
    }
    int best = -1;
    for (int i = 0; i < 2; ++i)
        if (state[i] == slot_state::ok && (best < 0 || slots[i].header_seq > slots[best].header_seq)) best = i;
    // A slot of another version written after the valid one is a newer
    // steppe's checkpoint (a damaged version field in an older slot is not).
    for (int i = 0; i < 2; ++i)
        if (state[i] == slot_state::other_version && (best < 0 || slots[i].header_seq > slots[best].header_seq))
            throw error(errc::version, path_ + " has store format version " + std::to_string(slots[i].version) +
                                           " (header slot " + std::to_string(i) + "); this build of steppe reads version " +
                                           std::to_string(format_version) + version_note(slots[i].version));
    if (best >= 0) {
        if (state[1 - best] == slot_state::ok && std::memcmp(slots[0].store_id, slots[1].store_id, 16) != 0)
            throw error(errc::corrupt, path_ + ": the two header slots (pages 0 and 1) name different stores");
        header_ = slots[best];
        header_slot_ = best;
        check_backed(header_.page_count);
        page_count_ = header_.page_count;
        meta_ = std::to_array(header_.meta);
        txn_seq_ = header_.txn_seq;
        return;
    }
    for (int i = 0; i < 2; ++i) {
        if (state[i] == slot_state::other_page_size)
            throw error(errc::version, path_ + " uses page size " + std::to_string(slots[i].page_size) +
                                           "; this build of steppe uses " + std::to_string(page_size));
    }
    std::string size_note = n < sizeof buf ? "; the file is only " + std::to_string(n) + " bytes" : "";
    if (state[0] == slot_state::no_magic && state[1] == slot_state::no_magic) {
        // A file written in one pass (a backup, a compacted store) has one
        // header slot; with it gone, the commit mark still shows a store.
        commit_mark m{};
        if (main_->read_at(commit_mark_page * page_size, {reinterpret_cast<std::byte*>(&m), sizeof m}) == sizeof m &&
            m.magic == commit_mark_magic && m.crc == struct_crc(m))
            throw error(errc::corrupt, path_ + ": neither header slot (pages 0 and 1) holds a header, but page 2 "
                                               "holds this store's commit mark: the header is damaged; restore the "
                                               "store from a backup");
        throw error(errc::version, path_ + " is not a steppe store (no steppe header in page 0 or 1" + size_note + ")");
    }
    throw error(errc::corrupt, path_ + ": both header slots are damaged (page 0: " + describe_slot(state[0]) +
                                   ", page 1: " + describe_slot(state[1]) + size_note + ")");
}

// A checkpoint writes page page_count - 1 and syncs before the header that
// counts it, so a sound main file reaches past that page.
void file_store::check_backed(page_no count) const {
    std::uint64_t size = main_->size();
    // Every main file has its two header slots and the commit mark, from its
    // creation on: one that ends before is cut short (named as such, not as
    // the log's generation that no longer follows the header left).
    if (size < first_group_page * page_size)
        throw error(errc::corrupt, path_ + ": the main file ends at byte " + std::to_string(size) +
                                       ", before its header slots and commit mark (" +
                                       std::to_string(first_group_page * page_size) +
                                       " bytes): it was cut short; restore it from a backup");
    if (count == 0) return;
    if (count > max_pages || size / page_size < count || size < (physical_page(count - 1) + 1) * page_size)
        throw error(errc::corrupt, path_ + ": the header counts " + std::to_string(count) +
                                       " pages but the file ends at byte " + std::to_string(size) +
                                       ": the main file is truncated or its header damaged");
}

// Nothing writes the main file past the last page a commit counts (a
// checkpoint writes the pages of commits it contains, and the log's replay
// counts at least those), so a file that goes on past it has a page count
// made too small: pages past it would read as never written (zeros) where the
// file holds them. Not beside a writer, whose checkpoint may have written
// past a reader's snapshot.
void file_store::check_nothing_past_the_count() const {
    const std::uint64_t size = main_->size();
    const std::uint64_t end = page_count_ == 0 ? first_group_page * page_size
                                               : (physical_page(page_count_ - 1) + 1) * page_size;
    if (size <= end) return;
    throw error(errc::corrupt, path_ + ": the store counts " + std::to_string(page_count_) + " pages (header slot " +
                                   std::to_string(header_slot_) + ", commit " + std::to_string(txn_seq_) +
                                   "), but the main file goes on to byte " + std::to_string(size) + ", " +
                                   std::to_string((size - end + page_size - 1) / page_size) +
                                   " page(s) past the last one counted: its header's page count is damaged, or "
                                   "the file was written past its end; restore it from a backup");
}

bool file_store::read_group_slot(std::uint64_t group, int slot, checksum_page& out) const {
    std::byte* p = reinterpret_cast<std::byte*>(&out);
    std::size_t n = main_->read_at(checksum_slot_page(group, slot) * page_size, {p, page_size});
    std::memset(p + n, 0, page_size - n);
    return checksum_page_valid(out, group);
}

// A group the header does not count yet may still have valid checksum pages
// in the file (left by a damaged or hand-made main file). The first copy
// written must be newer than any of them, or the next open would believe the
// stale one: continue from its seq and write the other slot. Its sums are
// not taken: the group's pages were never written as far as this store knows.
void file_store::outrank_stale_copies(std::uint64_t group, group_sums& sums) const {
    checksum_page copies[2];
    for (int i = 0; i < 2; ++i) {
        if (!read_group_slot(group, i, copies[i])) continue;
        if (sums.slot < 0 || newer(copies[i].seq, sums.page.seq)) {
            sums.page.seq = copies[i].seq;
            sums.slot = i;
        }
    }
}

// A group whose slots are both damaged is marked (slot -2): reads of its pages
// report corruption, the rest of the store stays readable.
void file_store::load_checksums() {
    std::uint64_t groups = (page_count_ + group_data_pages - 1) / group_data_pages;
    groups_.assign(groups, group_sums{});
    // The slots lie every 1,024 pages of the file: asked for all at once, a
    // cold open waits for the disk about once instead of once per slot.
    for (std::uint64_t g = 0; g < groups; ++g)
        for (int slot = 0; slot < 2; ++slot)
            if (!asked_at_open(checksum_slot_page(g, slot) * page_size))
                main_->will_need(checksum_slot_page(g, slot) * page_size, page_size);
    for (std::uint64_t g = 0; g < groups; ++g) {
        checksum_page copies[2];
        bool valid[2] = {read_group_slot(g, 0, copies[0]), read_group_slot(g, 1, copies[1])};
        int best = -1;
        for (int i = 0; i < 2; ++i)
            if (valid[i] && (best < 0 || newer(copies[i].seq, copies[best].seq))) best = i;
        if (best >= 0) {
            groups_[g] = {copies[best], best};
        } else {
            bool blank = all_zero(reinterpret_cast<std::byte*>(&copies[0]), page_size) &&
                         all_zero(reinterpret_cast<std::byte*>(&copies[1]), page_size);
            groups_[g].page = checksum_page{};
            groups_[g].slot = blank ? -1 : -2;
        }
    }
}

// The mark says how far the log of the generation the header expects is known
// to reach (file_format.hpp). A damaged mark only loses that knowledge; check()
// names it.
void file_store::load_mark() {
    commit_mark m{};
    std::size_t n = main_->read_at(commit_mark_page * page_size, {reinterpret_cast<std::byte*>(&m), sizeof m});
    mark_valid_ = n == sizeof m && m.magic == commit_mark_magic && m.crc == struct_crc(m) &&
                  std::memcmp(m.store_id, header_.store_id, sizeof m.store_id) == 0;
    mark_ = m;
}

bool file_store::mark_counts() const { return mark_valid_ && mark_.generation == header_.checkpoint_gen + 1; }

void file_store::write_mark(std::uint64_t generation, std::uint64_t txn, std::uint64_t log_end) {
    commit_mark m = make_mark(header_.store_id, generation, txn, log_end);
    main_->write_at(commit_mark_page * page_size, {reinterpret_cast<const std::byte*>(&m), sizeof m});
    mark_ = m;
    mark_valid_ = true;
}

// After a commit is published. Not synced: with durable = true the mark only
// ever claims what an fdatasync already made durable. (With durable = false a
// power loss may take commits the mark names: recovery then reports them lost
// instead of dropping them quietly.)
void file_store::note_commit_in_mark() {
    try {
        write_mark(wal_header_.generation, txn_seq_, wal_end_);
    } catch (const error&) {
        // The commit is durable; a lost mark only means a later damage to this
        // commit's frames could pass for a torn tail.
    }
}

// Recovery reads all of the log (replay, then examine_tail), so it is asked
// for now, while the main file's header, checksums and mark are read: a
// cold OO1 small open read its megabyte only after those, waiting ~0.7 ms.
void file_store::ask_for_the_log() {
    if (!io_->exists(wal_path_)) return;
    wal_ = io_->open(wal_path_, opts_.read_only ? open_mode::read_only : open_mode::read_write, opts_.file_mode);
    wal_->will_need(0, wal_->size());
}

void file_store::open_wal() {
    if (!wal_ && !io_->exists(wal_path_)) return open_missing_wal();
    if (!wal_)
        wal_ = io_->open(wal_path_, opts_.read_only ? open_mode::read_only : open_mode::read_write, opts_.file_mode);
    wal_allocated_ = wal_->size();
    wal_header h{};
    std::size_t n = wal_->read_at(0, {reinterpret_cast<std::byte*>(&h), sizeof h});
    bool intact = n == sizeof h && std::memcmp(h.magic, wal_magic, sizeof h.magic) == 0 && h.crc == struct_crc(h);
    std::uint64_t expected_gen = header_.checkpoint_gen + 1;
    // Whatever the log header says, the frames to replay are those of the
    // generation and salt the main header expects.
    wal_header_ = {};
    wal_header_.generation = expected_gen;
    wal_header_.salt = header_.next_wal_salt;
    if (!intact) {
        // A torn reset leaves a damaged header over a log with nothing the
        // main file lacks; damage leaves it over frames of this salt, which
        // replay then reads all the same. The mark and the frames decide.
        wal_needs_reset_ = true;
        return;
    }
    if (h.version < oldest_wal_format_version || h.version > wal_format_version || h.page_size != page_size)
        throw error(errc::version, wal_path_ + " has log format version " + std::to_string(h.version) + ", page size " +
                                       std::to_string(h.page_size) + "; this build reads versions " +
                                       std::to_string(oldest_wal_format_version) + " to " +
                                       std::to_string(wal_format_version) + ", page size " +
                                       std::to_string(page_size) +
                                       (h.version > wal_format_version ? " (written by a newer steppe: use that one)" : ""));
    if (std::memcmp(h.store_id, header_.store_id, sizeof h.store_id) != 0)
        throw error(errc::corrupt, "foreign log: " + wal_path_ + " belongs to store " + common::hex(h.store_id) +
                                       ", but " + path_ + " is store " + common::hex(header_.store_id));
    if (h.generation < expected_gen) {
        // The last checkpoint completed but crashed before resetting the log
        // (or the log was replaced by an older one: the mark tells).
        wal_needs_reset_ = true;
        return;
    }
    if (h.generation > expected_gen || h.salt != header_.next_wal_salt)
        throw error(errc::corrupt, wal_path_ + ": log generation " + std::to_string(h.generation) +
                                       " does not follow the main file's checkpoint generation " +
                                       std::to_string(header_.checkpoint_gen) +
                                       " (is the newer header slot of the main file damaged?)");
    wal_header_ = h;
}

// A missing log is the copy of a store closed cleanly, or a log deleted. Only
// the mark can say it held nothing the main file lacks.
void file_store::open_missing_wal() {
    bool held_nothing = mark_counts() && mark_.txn == header_.txn_seq;
    if (!held_nothing) {
        const std::string what = missing_log_message();
        if (!opts_.salvage || missing_log_held_commits()) throw error(errc::corrupt, what);
        missing_log_accepted_ = what;  // recover: nothing says what the log held; open at the main file's commit
    }
    wal_header_ = {};
    wal_header_.generation = header_.checkpoint_gen + 1;
    wal_header_.salt = header_.next_wal_salt;
    if (opts_.read_only) return;  // nothing to read from it; no file is made
    wal_ = io_->open(wal_path_, open_mode::create_new, opts_.file_mode);
    reset_wal(wal_header_.generation, wal_header_.salt);
    wal_allocated_ = wal_->size();  // as open_wal: the first commit grows the log past its header, not over it
    wal_->sync();
    io_->sync_dir_of(wal_path_);
}

// Why a missing log stops the open. Where the mark that would say what the
// log held is damaged (or of another generation), a main file that holds
// everything (a backup's, a compacted store's, one closed cleanly) cannot
// show it either: `steppe recover` opens it at its own commit.
std::string file_store::missing_log_message() const {
    const std::string missing = "the log " + wal_path_ + " of store " + path_ + " is missing";
    if (missing_log_held_commits())
        return missing + " (the main file's commit mark shows it held commits up to " + std::to_string(mark_.txn) +
               "); commits since the last checkpoint would be lost, so steppe will not open the store without it";
    const char* mark = !mark_valid_ ? "damaged" : !mark_counts() ? "of another log generation" : "behind the header";
    return missing + ", and the main file's commit mark (page 2), which says whether it held commits the main file "
                     "lacks, is " + mark +
           ", so commits after commit " + std::to_string(header_.txn_seq) +
           " (the main file's) may be lost. If the store was closed cleanly, or this main file is a backup or a "
           "compacted store, it holds everything: `steppe recover " + path_ + "` opens it at commit " +
           std::to_string(header_.txn_seq) + " and writes a new log and mark";
}

// recover of a main file whose log is missing and whose mark cannot say what
// the log held: a checkpoint (of no commit) writes a new mark beside the new
// log, so later opens need no recover.
void file_store::accept_missing_log() {
    if (std::optional<reader_info> r = checkpoint_now(true))
        throw error(errc::locked, missing_log_accepted_ + ". Recovery must wait: reader process " +
                                      std::to_string(r->pid) + " still reads the store");
    salvage_report_ = missing_log_accepted_ + ".\nRecovered: the store holds commit " + std::to_string(txn_seq_) +
                      " (the main file's); a new log and commit mark were written.";
}

// Reads the frame at `offset`; nullptr if it is intact (wal_format.hpp,
// conditions 1-4), else why not.
const char* file_store::read_frame(std::uint64_t offset, frame_header& h, std::byte* payload) const {
    if (wal_->read_at(offset, {reinterpret_cast<std::byte*>(&h), sizeof h}) != sizeof h) return "the log ends there";
    if (h.magic != frame_magic || h.salt != wal_header_.salt) return "no frame of this log generation starts there";
    if (!payload_known(h)) return "a frame of unknown kind, or a difference longer than any the log holds";
    std::size_t n = payload_size(h);
    if (wal_->read_at(offset + sizeof h, {payload, n}) != n) return "the log ends inside the frame";
    if (frame_crc_of(h, payload) != h.frame_crc) return "the frame fails its checksum";
    if (h.kind == frame_kind::page && page_checksum(payload, page_size) != h.payload_crc)
        return "the page image fails its checksum";
    if (h.kind == frame_kind::diff && !page_diff_well_formed(payload, h.payload_bytes))
        return "a difference frame whose runs break the format (page_diff.hpp)";
    return nullptr;
}

void file_store::replay_wal() {
    replay_frames(std::numeric_limits<std::uint64_t>::max());
    judge_log();
}

// Replays the log's complete commits that end by `limit` (a reader's
// snapshot); replay_stop_ says where and why it stopped.
void file_store::replay_frames(std::uint64_t limit) {
    wal_index_.clear();
    wal_end_ = wal_frames_offset;
    wal_chain_ = chain_seed(wal_header_.salt);
    wal_commits_ = 0;
    replay_from(limit);
}

// A reader's open after `older` (options::after, a refresh) that reads the
// same log generation over the same main file: the commits older read are
// taken from it (they are the same frames: a generation's frames are never
// overwritten while a reader of it lives, invariant 5), and only the log
// past them is read. false: it does not apply.
bool file_store::resume_after(const snapshot& s) {
    const auto* older = dynamic_cast<const file_store*>(opts_.after);
    if (!older || !older->wal_ || !wal_ ||
        std::memcmp(older->header_.store_id, header_.store_id, sizeof header_.store_id) != 0 ||
        older->header_.checkpoint_gen != header_.checkpoint_gen || older->header_.txn_seq != header_.txn_seq ||
        older->wal_header_.generation != s.generation || older->wal_header_.salt != s.salt ||
        older->wal_end_ > s.log_end)
        return false;
    wal_index_ = older->wal_index_;
    wal_end_ = older->wal_end_;
    wal_chain_ = older->wal_chain_;
    wal_commits_ = older->wal_commits_;
    txn_seq_ = older->txn_seq_;
    page_count_ = older->page_count_;
    meta_ = older->meta_;
    replay_from(s.log_end);
    return true;
}

// Reads the commits from wal_end_ (whose chain checksum is wal_chain_, after
// txn_seq_) up to `limit`, adding them to the index.
void file_store::replay_from(std::uint64_t limit) {
    std::vector<std::pair<page_no, wal_entry>> pending;
    std::vector<std::byte> frame(page_size);
    std::uint64_t off = wal_end_;
    std::uint32_t chain = wal_chain_;
    page_no txn_pages = 0;  // highest page + 1 of the transaction being read
    const char* stop = wal_ ? nullptr : "there is no log";
    while (!stop) {
        frame_header h;
        if (off >= limit) {
            stop = "the end of the reader's snapshot";
            break;
        }
        if ((stop = read_frame(off, h, frame.data()))) break;
        if (h.txn != txn_seq_ + 1) {
            stop = "a frame of another commit";
            break;
        }
        std::uint32_t next = chain_of(chain, h.frame_crc);
        if (next != h.chain) {
            stop = "a frame out of order: its chain checksum does not follow the frame before";
            break;
        }
        if (h.kind != frame_kind::commit) {
            if (h.number >= max_pages) {
                stop = "a page number beyond any store";
                break;
            }
            const bool diff = h.kind == frame_kind::diff;
            pending.push_back({h.number, {{off + sizeof h, diff, diff ? h.payload_bytes : 0}, h.payload_crc}});
            txn_pages = std::max(txn_pages, h.number + 1);
        } else {
            // commit() always records max(page count, highest page + 1).
            if (h.payload_crc != pending.size() || h.number != std::max(page_count_, txn_pages)) {
                stop = "a commit record that does not match its transaction's page frames";
                break;
            }
            index_committed(pending);
            pending.clear();
            txn_pages = 0;
            page_count_ = h.number;
            std::memcpy(meta_.data(), frame.data(), meta_size);
            ++txn_seq_;
            ++wal_commits_;
            wal_end_ = off + sizeof h + payload_size(h);
            wal_chain_ = next;
        }
        chain = next;
        off += sizeof h + payload_size(h);
    }
    replay_stop_ = off;
    replay_stop_reason_ = stop;
    discard_pending();
}

// Looks past the point where replay stopped for what shows that commits after
// the last replayed one were durable (wal_format.hpp).
file_store::tail_evidence file_store::examine_tail(std::uint64_t from) const {
    tail_evidence ev;
    if (mark_counts() && mark_.txn > txn_seq_) {
        ev.shown_txn = mark_.txn;
        ev.proof = "the commit mark in page 2 of " + path_ + " records commit " + std::to_string(mark_.txn) +
                   ", ending at log byte " + std::to_string(mark_.log_end) + ", as durable";
    }
    if (!wal_) return ev;
    // Not zeroed: a zeroed 1 MiB buffer cost each open ~1 ms of page faults
    // and memset, more than reading a reset log's megabyte from the page cache.
    constexpr std::size_t chunk = tail_scan_piece_bytes;
    // A frame starting in the chunk is read whole with the bytes its checksum covers.
    const std::size_t buf_size = chunk + sizeof(frame_header) + std::max(meta_size, max_diff_bytes);
    const auto buf = std::make_unique_for_overwrite<std::byte[]>(buf_size);
    for (std::uint64_t at = from;; at += chunk) {
        std::size_t n = wal_->read_at(at, {buf.get(), buf_size});
        for (std::size_t i = 0; i + sizeof(frame_header) <= n && i < chunk; i += 8) {
            std::uint32_t magic;
            std::memcpy(&magic, buf.get() + i, sizeof magic);
            if (magic != frame_magic) continue;
            frame_header h;
            std::memcpy(&h, buf.get() + i, sizeof h);
            if (h.salt != wal_header_.salt || h.txn <= txn_seq_) continue;
            if (!payload_known(h) || i + sizeof h + covered_payload(h) > n) continue;
            if (frame_crc_of(h, buf.get() + i + sizeof h) != h.frame_crc) continue;
            ev.last_seen_txn = std::max(ev.last_seen_txn, h.txn);
            if (h.kind != frame_kind::commit) ev.pages.push_back(h.number);
            // A commit starts only once the one before it is durable.
            if (h.txn >= txn_seq_ + 2 && h.txn - 1 > ev.shown_txn) {
                ev.shown_txn = h.txn - 1;
                ev.proof = "an intact frame of commit " + std::to_string(h.txn) + " follows at log byte " +
                           std::to_string(at + i) + ", and a commit starts only once the one before it is durable";
            }
        }
        if (n <= chunk) break;  // frames starting past the chunk are the next one's
    }
    std::sort(ev.pages.begin(), ev.pages.end());
    ev.pages.erase(std::unique(ev.pages.begin(), ev.pages.end()), ev.pages.end());
    return ev;
}

// Invariant 4: a transaction is dropped at recovery only if nothing shows it
// committed (its commit record missing or torn, no later commit, the mark not
// past it). Anything else is damage: corrupt, or salvage when asked.
void file_store::judge_log() {
    tail_evidence ev = examine_tail(replay_stop_);
    if (ev.shown_txn <= txn_seq_) {
        if (wal_needs_reset_ && wal_commits_ == 0 && !opts_.read_only)
            reset_wal(header_.checkpoint_gen + 1, header_.next_wal_salt);
        return;
    }
    std::string what = wal_path_ + ": the log is damaged at byte " + std::to_string(replay_stop_) + " (" +
                       replay_stop_reason_ + "), where commit " + std::to_string(txn_seq_ + 1) + " should be";
    if (wal_needs_reset_) what += "; its header (bytes 0-55) is damaged or of another generation too";
    what += ". Commits " + std::to_string(txn_seq_ + 1) + " to " + std::to_string(ev.shown_txn) + " were durable (" +
            ev.proof + ") and cannot be read";
    // Frames of a later commit show it was written, not that it was durable
    // (examine_tail: a frame of commit t shows t - 1, so at most one is left).
    if (ev.last_seen_txn > ev.shown_txn)
        what += ", nor can commit " + std::to_string(ev.last_seen_txn) +
                ", whose frames follow (nothing shows whether it was durable)";
    if (!ev.pages.empty()) {
        what += "; intact frames after the damage name pages";
        for (std::size_t i = 0; i < ev.pages.size() && i < 20; ++i) what.append(" ").append(std::to_string(ev.pages[i]));
        if (ev.pages.size() > 20) what += " and " + std::to_string(ev.pages.size() - 20) + " more";
        what += " (damaged frames name none)";
    }
    if (opts_.salvage && !opts_.read_only) return salvage(what);
    struct stat st;
    if (::stat(path_.c_str(), &st) == 0 && st.st_nlink > 1)
        throw error(errc::corrupt, what + ". Nothing was changed. " + path_ + " has " + std::to_string(st.st_nlink) +
                                       " names (hard links): a writer that opened it by another name keeps its "
                                       "commits in that name's log (NAME-wal); open the store by that name, which "
                                       "replays them. `steppe recover` would drop them");
    throw error(errc::corrupt, what + ". Nothing was changed. `steppe recover " + path_ + "` opens the store at commit " +
                                   std::to_string(txn_seq_) + ", the last one before the damage, and keeps the damaged "
                                   "log as " + wal_path_ + ".damaged");
}

// Keeps the commits before the damage: the log is copied aside, then a
// checkpoint (even of no commit) moves them into the main file, rewrites the
// mark and starts a new log. A crash before the checkpoint's header leaves
// the damaged log in place, to salvage again.
void file_store::salvage(const std::string& what) {
    std::string aside = copy_log_aside();
    if (std::optional<reader_info> r = checkpoint_now(true))
        throw error(errc::locked, what + ". Salvage must wait: reader process " + std::to_string(r->pid) +
                                      " still reads the store (the damaged log was copied to " + aside + ")");
    salvage_report_ = what + ".\nSalvaged: the store now holds commit " + std::to_string(txn_seq_) +
                      "; the damaged log was copied to " + aside + " and a new log started.";
}

std::string file_store::copy_log_aside() {
    std::string aside = wal_path_ + ".damaged";
    for (int i = 2; io_->exists(aside); ++i) aside = wal_path_ + ".damaged-" + std::to_string(i);
    auto copy = io_->open(aside, open_mode::create_new, opts_.file_mode);
    std::vector<std::byte> buf(1 << 20);
    for (std::uint64_t at = 0;;) {
        std::size_t n = wal_->read_at(at, buf);
        if (n == 0) break;
        copy->write_at(at, {buf.data(), n});
        at += n;
    }
    copy->sync();
    io_->sync_dir_of(aside);
    return aside;
}

// 3. Reads -----------------------------------------------------------------

std::uint32_t file_store::expected_sum(page_no page) const noexcept {
    std::uint64_t g = group_of(page);
    return g < groups_.size() ? groups_[g].page.sums[page % group_data_pages] : 0;
}

bool file_store::find_pending(page_no page, wal_entry& out) const noexcept {
    std::lock_guard<const common::spin_lock> hold(pending_lock_);
    log_index::entry e;
    if (!pending_.find(page, e)) return false;
    out = {log_index::unpack(e.where), e.sum};
    return true;
}

bool file_store::read_page_nothrow(page_no page, std::byte* out, read_failure* why, bool read_around) const noexcept {
    return read_version(page, out, why, read_around, true);
}

bool file_store::read_committed_page_nothrow(page_no page, std::byte* out, read_failure* why,
                                          bool read_around) const noexcept {
    return read_version(page, out, why, read_around, false);
}

bool file_store::read_version(page_no page, std::byte* out, read_failure* why, bool read_around,
                           bool with_pending) const noexcept {
    common::fixed_message msg(why->message, sizeof why->message);
    why->code = errc::corrupt;
    wal_entry spilled, committed;
    const wal_entry* logged = nullptr;  // the transaction in progress's spilled pages come first
    if (with_pending && find_pending(page, spilled)) logged = &spilled;
    else if (log_index::entry e; wal_index_.find(page, e)) logged = &(committed = {log_index::unpack(e.where), e.sum});
    if (!logged && page >= page_count_) {
        why->code = errc::invalid_argument;
        msg << path_.c_str() << ": page " << page << " is beyond the store's " << page_count_ << " pages";
        return false;
    }
    if (logged) return read_logged(page, *logged, out, msg, why);
    std::uint64_t g = group_of(page);
    if (g < groups_.size() && groups_[g].slot == -2) {
        msg << path_.c_str() << ": page " << page << " cannot be verified: both checksum pages of its group ("
            << checksum_slot_page(g, 0) << " and " << checksum_slot_page(g, 1) << ") are damaged";
        return false;
    }
    const std::uint64_t offset = physical_page(page) * page_size;
    long n = read_main_page(page, out, read_around);
    if (n < 0) {
        why->code = errc::io;
        msg << "pread failed on " << path_.c_str() << " reading page " << page << ", errno " << std::uint64_t(-n);
        return false;
    }
    std::uint32_t sum = expected_sum(page);
    if (sum == 0) {
        if (all_zero(out, page_size)) return true;
        msg << path_.c_str() << ": page " << page << " (file offset " << offset
            << ") was never written but is not zero";
        return false;
    }
    if (static_cast<std::size_t>(n) == page_size && page_checksum(out, page_size) == sum) return true;
    msg << path_.c_str() << ": page " << page << " (file offset " << offset << ") "
        << (static_cast<std::size_t>(n) < page_size ? "is cut short: the file is truncated" : "fails its checksum");
    return false;
}

// The main file's bytes of `page`, zeros past its end: the bytes read, or
// -errno. With read_around, a read that misses the page cache brings the
// aligned cluster around the page in one I/O.
long file_store::read_main_page(page_no page, std::byte* out, bool read_around) const noexcept {
    const std::uint64_t offset = physical_page(page) * page_size;
    long n = read_around ? main_->read_cached_nothrow(offset, out, page_size) : -EAGAIN;
    if (n == -EAGAIN) {
        // A miss goes to the disk anyway, and data pages allocated together
        // are used together, so read the aligned cluster around it in one
        // I/O, as the kernel's read-around does for a file mapped with mmap.
        if (read_around) {
            waited_reads_.fetch_add(1, std::memory_order_relaxed);
            const auto cluster = around_.miss(offset);
            main_->will_need(cluster.start, cluster.bytes);
        }
        n = main_->read_at_nothrow(offset, out, page_size);
    } else if (read_around && n >= 0) {
        around_.hit(offset);
    }
    if (n >= 0) std::memset(out + n, 0, page_size - static_cast<std::size_t>(n));
    return n;
}

// A page version in the log: its image, or its difference applied to the
// main file's page (wal_format.hpp). page_size, or what a short read gave,
// or -errno; `malformed` if a difference breaks the format.
long file_store::read_log_version(page_no page, const wal_entry& e, std::byte* out, bool& malformed) const noexcept {
    if (!e.at.diff) return wal_->read_at_nothrow(e.at.offset, out, page_size);
    std::byte diff[max_diff_bytes];
    const std::size_t bytes = std::min<std::size_t>(e.at.diff_bytes, sizeof diff);
    long n = wal_->read_at_nothrow(e.at.offset, diff, bytes);
    if (n < 0 || static_cast<std::size_t>(n) < bytes) return n;  // short: read_logged says the log is cut short
    long base = read_main_page(page, out, false);
    if (base < 0) return base;
    malformed = !apply_page_diff(diff, bytes, out);
    return static_cast<long>(page_size);
}

// A page version in the log. A reader beside the writer reads it from the
// main file instead once the reader table says the writer checkpointed the
// snapshot's log (which may then be overwritten; the main file holds
// exactly this version: invariant 5). Asked again after the read, which
// may have raced the log's reset.
bool file_store::read_logged(page_no page, const wal_entry& e, std::byte* out, common::fixed_message& msg,
                          read_failure* why) const noexcept {
    bool malformed = false;
    bool from_main = log_overtaken();
    long n = from_main ? 0 : read_log_version(page, e, out, malformed);
    from_main = from_main || log_overtaken();
    std::uint64_t offset = from_main ? physical_page(page) * page_size : e.at.offset;
    if (from_main) n = main_->read_at_nothrow(offset, out, page_size), malformed = false;
    const std::string& file = from_main ? path_ : wal_path_;
    if (n < 0) {
        why->code = errc::io;
        msg << "pread failed on " << file.c_str() << " or the main file reading page " << page << ", errno "
            << std::uint64_t(-n);
        return false;
    }
    if (!malformed && static_cast<std::size_t>(n) == page_size && page_checksum(out, page_size) == e.sum) return true;
    msg << file.c_str() << ": page " << page << " (" << (from_main ? "file" : "log") << " offset " << offset << ") ";
    const std::size_t frame_bytes = !from_main && e.at.diff ? e.at.diff_bytes : page_size;
    if (static_cast<std::size_t>(n) < frame_bytes)
        msg << "is cut short: " << std::uint64_t(n) << " of its " << std::uint64_t{frame_bytes}
            << " bytes are there, so the " << (from_main ? "main file" : "log") << " was truncated";
    else if (malformed) msg << "is a difference frame whose runs break the format";
    else if (!from_main && e.at.diff)
        msg << "is a difference against the main file's page (file offset " << physical_page(page) * page_size
            << "), and what it makes fails the page's checksum: that main-file page or the frame is damaged";
    else msg << "fails its checksum";
    return false;
}

bool file_store::log_overtaken() const noexcept {
    if (!readers_ || !opts_.read_only) return false;
    std::atomic_thread_fence(std::memory_order_seq_cst);  // the read before it happened first
    return readers_->checkpointed_gen() >= wal_header_.generation;
}

void file_store::prefetch(page_no page) const noexcept {
    wal_entry logged;
    log_index::entry e;
    bool in_log = find_pending(page, logged);
    if (!in_log && wal_index_.find(page, e)) in_log = true, logged = {log_index::unpack(e.where), e.sum};
    if (in_log) wal_->will_need(logged.at.offset, logged.at.diff ? logged.at.diff_bytes : page_size);
    // A difference is made from the main file's page.
    if ((in_log ? logged.at.diff : page < page_count_) && !asked_at_open(physical_page(page) * page_size))
        main_->will_need(physical_page(page) * page_size, page_size);
}

void file_store::read_page(page_no page, std::byte* out) const {
    ensure_usable();
    read_failure why;
    if (!read_page_nothrow(page, out, &why)) throw error(why.code, why.message);
}

void file_store::ensure_usable() const {
    if (poisoned_)
        throw error(errc::poisoned, path_ + ": " + poisoned_by_ +
                                        "; close and reopen the store (recovery restores the last durable commit)");
}

// 4. Commit ----------------------------------------------------------------
//
// A transaction's page frames may reach the log in several writes: spill()
// appends frames of the transaction in progress (no commit frame, no sync:
// until the commit they are a torn tail to recovery), commit() appends the
// rest and the commit frame:
//   1. append page frames and a commit frame, chained, in one write
//   2. fdatasync the log                       (the commit point)
//   3. publish: index the new images, adopt the meta and page count
//   4. checkpoint if the log has grown past the threshold

file_store::log_tail file_store::append(std::span<const page_image> pages, const meta_bytes* meta,
                                  std::vector<std::pair<page_no, wal_entry>>& entries) {
    ensure_usable();
    if (opts_.read_only) throw error(errc::invalid_argument, path_ + " is open read-only; commit is not allowed");
    log_tail t = tail_;
    std::uint64_t txn = txn_seq_ + 1;
    std::vector<std::byte>& buf = append_buffer_;  // reused, up to retained_append_frames
    // At most this much: diff frames are smaller than page frames.
    const std::size_t bytes = pages.size() * page_frame_size + (meta ? commit_frame_size : 0);
    buf.reserve(bytes);  // exactly: resize alone may double it, and it is kept
    buf.resize(bytes);
    std::size_t at = 0;
    auto put = [&](frame_kind kind, std::uint64_t number, std::uint32_t payload_crc, const std::byte* payload,
                   std::size_t n) {
        const std::uint32_t diff_bytes = kind == frame_kind::diff ? static_cast<std::uint32_t>(n) : 0;
        frame_header h{frame_magic, kind, wal_header_.salt, txn, number, payload_crc, diff_bytes, 0, 0};
        h.frame_crc = frame_crc_of(h, payload);
        h.chain = t.chain = chain_of(t.chain, h.frame_crc);
        std::memcpy(buf.data() + at, &h, sizeof h);
        std::memcpy(buf.data() + at + sizeof h, payload, n);
        std::memset(buf.data() + at + sizeof h + n, 0, padded_to_frame(n) - n);
        at += sizeof h + padded_to_frame(n);
    };
    check_page_numbers(pages, path_);
    std::byte diff[max_diff_bytes];
    const std::uint64_t main_bytes = opts_.log_diffs ? main_->size() : 0;
    // A difference costs a read of the main file's copy (from the page
    // cache) and a compare, 2-3 us a page, wasted on pages rewritten whole
    // (a bulk load, a rewrite of every object): after 16 such pages in a
    // row only every 16th is tried, until one fits again.
    constexpr std::size_t give_up_after = 16;
    std::size_t misses = 0;
    for (const auto& p : pages) {
        std::uint32_t sum = page_checksum(p.data, page_size);
        const bool try_diff = opts_.log_diffs && (misses < give_up_after || misses % give_up_after == 0);
        const long diff_bytes = try_diff ? diff_against_main(p, main_bytes, diff) : -1;
        if (opts_.log_diffs) misses = diff_bytes >= 0 ? 0 : misses + 1;
        const bool as_diff = diff_bytes >= 0;
        const std::uint32_t n = as_diff ? static_cast<std::uint32_t>(diff_bytes) : page_size;
        entries.push_back({p.page, {{t.end + at + sizeof(frame_header), as_diff, as_diff ? n : 0}, sum}});
        put(as_diff ? frame_kind::diff : frame_kind::page, p.page, sum, as_diff ? diff : p.data, n);
        stats_.pages_as_diffs += as_diff;
        t.page_count = std::max(t.page_count, p.page + 1);
    }
    t.frames += pages.size();
    if (meta) put(frame_kind::commit, t.page_count, static_cast<std::uint32_t>(t.frames), meta->data(), meta_size);
    buf.resize(at);
    extend_log(t.end + buf.size());
    wal_->write_at(t.end, buf);  // a failure here leaves a torn tail: state unchanged
    t.end += buf.size();
    stats_.bytes_written += buf.size();
    stats_.pages_written += pages.size();
    if (buf.capacity() > retained_append_frames * page_frame_size) buf = {};  // a rare big write keeps no memory
    return t;
}

// The difference of a page version against the main file's copy of the
// page (wal_format.hpp): its length in `diff`, or -1 when the whole page
// is the smaller record. The main file changes only at checkpoints, which
// copy the newest versions, so a difference holds until the log is reset.
// Only a copy in the page cache is compared: a difference must not cost a
// disk read (the eviction thread spills pages under memory pressure, when
// the page cache holds little), so a page whose copy is not cached is
// logged whole.
long file_store::diff_against_main(const page_image& p, std::uint64_t main_bytes, std::byte* diff) const {
    std::byte base[page_size];
    const std::uint64_t offset = physical_page(p.page) * page_size;
    long n = offset >= main_bytes ? 0 : main_->read_cached_nothrow(offset, base, page_size);  // past the end: zeros
    if (n < 0) return -1;
    std::memset(base + n, 0, page_size - static_cast<std::size_t>(n));
    return encode_page_diff(base, p.data, diff);
}

// Appending to a file makes fdatasync commit its new size through the file
// system's journal too, which costs as much again as the data. So the log
// grows ahead of need by writing zeros (not fallocate: its unwritten extents
// cost the same journal commit), in steps of at least log_growth, and commits then
// overwrite in place. Zeros are never a valid frame.
void file_store::extend_log(std::uint64_t needed) {
    if (needed <= wal_allocated_ || opts_.log_growth == 0) return;
    // Round up to the unit, then add as much again as the log has (doubling,
    // at most 64 units at a time), so a small store keeps a small log.
    std::uint64_t unit = opts_.log_growth;
    std::uint64_t step = wal_allocated_ >= unit ? std::min(wal_allocated_, 64 * unit) : 0;
    std::uint64_t target = (needed + step + unit - 1) / unit * unit;
    // 1 MiB at a time: a bigger buffer is heap the program pays for in a
    // small memory cgroup (the file paces its page cache: posix_env.cpp).
    std::vector<std::byte> zeros(std::min<std::uint64_t>(target - wal_allocated_, 1 << 20));
    for (std::uint64_t at = wal_allocated_; at < target; at += zeros.size())
        wal_->write_at(at, {zeros.data(), std::min<std::uint64_t>(zeros.size(), target - at)});
    wal_allocated_ = target;
}

void file_store::spill(std::span<const page_image> pages) {
    std::vector<std::pair<page_no, wal_entry>> entries;
    tail_ = append(pages, nullptr, entries);
    const std::vector<log_index::entry> spilled = index_entries(entries);
    std::lock_guard<const common::spin_lock> hold(pending_lock_);
    pending_.add(spilled);
}

std::vector<log_index::entry> file_store::index_entries(std::span<const std::pair<page_no, wal_entry>> entries) {
    std::vector<log_index::entry> out;
    out.reserve(entries.size());
    for (const auto& [page, entry] : entries)
        out.push_back({static_cast<std::uint32_t>(page), entry.sum, log_index::pack(entry.at)});
    return out;
}

void file_store::index_committed(std::span<const std::pair<page_no, wal_entry>> entries) {
    wal_index_.add(index_entries(entries));
}

file_store::memory file_store::memory_bytes() const noexcept {
    std::lock_guard<const common::spin_lock> hold(pending_lock_);
    return {groups_.capacity() * sizeof(group_sums) + wal_index_.memory_bytes() + pending_.memory_bytes(),
            append_buffer_.capacity()};
}

std::size_t file_store::pending_count() const noexcept {
    std::lock_guard<const common::spin_lock> hold(pending_lock_);
    return pending_.distinct();
}

std::vector<page_no> file_store::pending_pages() const {
    std::vector<page_no> pages;
    {
        std::lock_guard<const common::spin_lock> hold(pending_lock_);
        pending_.for_each_newest([&pages](const log_index::entry& e) { pages.push_back(e.page); });
    }
    return pages;
}

void file_store::discard_pending() noexcept {
    std::lock_guard<const common::spin_lock> hold(pending_lock_);
    pending_.clear();
    tail_ = {wal_end_, wal_chain_, 0, page_count_};
}

void file_store::commit(std::span<const page_image> pages, const meta_bytes& meta) {
    std::vector<std::pair<page_no, wal_entry>> entries;
    log_tail t = append(pages, &meta, entries);
    if (opts_.durable) {
        try {
            wal_->sync();
        } catch (const error&) {
            poisoned_ = true;
            throw;
        }
        ++stats_.syncs;
    }
    // The commit is durable from here; the indexes must follow it, or reads
    // would go to the versions it superseded. They change whole or not at
    // all (N2 in log_index.hpp), so an allocation that fails on the way
    // leaves the handle poisoned, not wrong.
    try {
        {
            std::lock_guard<const common::spin_lock> hold(pending_lock_);
            wal_index_.absorb(std::move(pending_));
        }
        index_committed(entries);
    } catch (const std::bad_alloc&) {
        poisoned_ = true;
        poisoned_by_ = "commit " + std::to_string(txn_seq_ + 1) +
                       " reached the disk, but there was no memory to index its pages in this process";
        throw error(errc::poisoned, path_ + ": " + poisoned_by_ +
                                        "; close and reopen the store (recovery finds that commit)");
    }
    page_count_ = t.page_count;
    meta_ = meta;
    ++txn_seq_;
    wal_end_ = t.end;
    wal_chain_ = t.chain;
    discard_pending();
    ++wal_commits_;
    ++stats_.commits;
    publish();
    note_commit_in_mark();  // after publish: commits_beyond_this_table reads them the other way round

    if (wal_end_ - wal_frames_offset > opts_.checkpoint_bytes) {
        // The commit is durable whatever happens now; a failed checkpoint
        // (e.g. disk full) is retried after the next commit, and so is one a
        // reader holding an older snapshot defers.
        // One that leaves the handle unsure of the disk poisons it for the
        // calls after this one, naming why.
        try {
            if (!try_checkpoint()) wait_for_readers_and_checkpoint();
        } catch (const error&) {
        } catch (const std::bad_alloc&) {  // as a full disk: the log keeps the pages until a later one
        }
    }
}

// 5. Checkpoint -------------------------------------------------------------
//
//   1. copy every page whose newest version is in the log to the main file,
//      and write each touched group's checksums into its older slot
//   2. fdatasync the main file
//   3. write the older header slot: checkpoint_gen = this log's generation,
//      a fresh salt for the next; fdatasync               (invariant 2)
//   4. reset the log to the next generation; fdatasync
// A crash before 3 completes leaves the log intact (replayed again); after 3,
// open sees the old generation in the log and only redoes step 4.
void file_store::checkpoint() {
    std::optional<reader_info> r = checkpoint_now(false);
    if (!r) return;
    std::string who = r->table_replaced
                          ? readers_->path() + " is no longer this writer's reader table (another program replaced "
                                               "it), so the snapshots of readers that opened since are unknown; "
                                               "close the store and open it again to take that table over"
                      : r->by_other_name
                          ? "a reader opened the store by another name (a hard link), so its snapshot is unknown"
                      : r->txn < txn_seq_
                          ? "reader process " + std::to_string(r->pid) + " reads commit " + std::to_string(r->txn) +
                                ", older than the newest (" + std::to_string(txn_seq_) + ")"
                          : "reader process " + std::to_string(r->pid) + " reads commit " + std::to_string(r->txn) +
                                " as log generation " + std::to_string(r->generation) +
                                " held it, before a checkpoint since, and has not refreshed";
    throw error(errc::locked, path_ + ": no checkpoint: " + who +
                                  ", and a checkpoint would overwrite pages it reads; it runs once every reader has "
                                  "refreshed or closed");
}

bool file_store::try_checkpoint() { return !checkpoint_now(false); }

// Readers that refresh often are still at an older commit at almost every
// instant a busy writer tries to checkpoint, so without a pause the log
// would grow for as long as they run. The writer stops committing for a
// moment (this commit is already durable; only its return waits) and
// checkpoints as soon as every reader is at the newest commit. A reader
// that keeps an old snapshot longer makes it give up; it waits again only
// once the log has grown by another checkpoint_bytes, so such a reader
// costs the writer at most one wait per checkpoint_bytes of log.
void file_store::wait_for_readers_and_checkpoint() {
    const std::uint64_t log_bytes = wal_end_ - wal_frames_offset;
    if (!readers_ || opts_.checkpoint_wait.count() <= 0 || log_bytes < next_reader_wait_) return;
    ++stats_.checkpoint_waits;
    const auto give_up = std::chrono::steady_clock::now() + opts_.checkpoint_wait;
    while (std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (const std::optional<reader_info> r = readers_->first_reader_not_at(wal_header_.generation, wal_end_)) {
            if (r->table_replaced) break;  // no reader's refresh ends that: only reopening the store
            continue;
        }
        if (try_checkpoint()) return;
    }
    ++stats_.checkpoint_waits_expired;
    next_reader_wait_ = log_bytes + opts_.checkpoint_bytes;
}

namespace {
// The checkpoint epoch is odd from before the writer looks at the readers
// until the checkpoint is done (reader_table.hpp).
struct checkpoint_scope {
    reader_table* table;
    explicit checkpoint_scope(reader_table* t) : table(t) {
        if (table) table->begin_checkpoint();
    }
    ~checkpoint_scope() {
        if (table) table->end_checkpoint();
    }
};
}  // namespace

// even_if_empty: salvage must move to a new generation even when no commit
// came before the damage, so the damaged log is not replayed again.
// Returns the reader that made it wait, if one did (invariant 5).
std::optional<reader_info> file_store::checkpoint_now(bool even_if_empty) {
    ensure_usable();
    if (opts_.read_only || (wal_commits_ == 0 && !even_if_empty) || !pending_.empty()) return std::nullopt;
    checkpoint_scope scope(readers_.get());
    if (readers_) {
        if (std::optional<reader_info> behind = readers_->first_reader_not_at(wal_header_.generation, wal_end_)) {
            ++stats_.checkpoints_deferred;
            return behind;
        }
    }
    // The pages copied below may overwrite what the log's differences were
    // made against; replay after a crash mid-copy is right only from the
    // newest frames (D1 in page_diff.hpp), so they must be on the disk
    // first. With durable = true every commit synced them already.
    if (!opts_.durable) wal_->sync();
    std::uint64_t groups = (page_count_ + group_data_pages - 1) / group_data_pages;
    std::map<std::uint64_t, group_sums> touched;
    std::vector<std::byte> image(page_size);
    read_failure why;
    wal_index_.for_each_newest([&](const log_index::entry& entry) {
        const page_no page = entry.page;
        if (!read_page_nothrow(page, image.data(), &why)) throw error(why.code, why.message);
        main_->write_at(physical_page(page) * page_size, image);
        std::uint64_t g = group_of(page);
        auto [it, fresh] = touched.try_emplace(g);
        if (fresh) it->second = g < groups_.size() ? groups_[g] : group_sums{checksum_page{}, -1};
        if (fresh && it->second.slot == -1) outrank_stale_copies(g, it->second);
        it->second.page.sums[page % group_data_pages] = entry.sum;
    });
    for (auto& [g, sums] : touched) {
        if (sums.slot == -2) {
            throw error(errc::corrupt, path_ + ": cannot checkpoint into group " + std::to_string(g) +
                                           ": both of its checksum pages are damaged");
        }
        int slot = sums.slot == 0 ? 1 : 0;
        sums.page.magic = checksum_page_magic;
        sums.page.group = static_cast<std::uint32_t>(g);
        ++sums.page.seq;
        sums.page.crc = struct_crc(sums.page);
        sums.slot = slot;
        main_->write_at(checksum_slot_page(g, slot) * page_size,
                        {reinterpret_cast<const std::byte*>(&sums.page), page_size});
    }
    std::uint64_t next_salt = random_u64();
    // Until the header is written a failure changes nothing a reopen trusts:
    // the header still names this log, which is replayed over the pages
    // written so far. The next checkpoint writes them all again (every page
    // the log holds; after a failed fdatasync the kernel may have dropped
    // them), so the handle goes on.
    //
    // A checkpoint syncs with durable = false too: its header must never
    // reach the disk before the pages it counts, nor the next log before
    // the header (a power loss then left stores no recover could open).
    // What durable = false gives up is the sync of each commit.
    main_->sync();
    try {
        file_header h = header_;
        ++h.header_seq;
        h.checkpoint_gen = wal_header_.generation;
        h.next_wal_salt = next_salt;
        h.page_count = page_count_;
        h.txn_seq = txn_seq_;
        std::memcpy(h.meta, meta_.data(), meta_size);
        h.crc = struct_crc(h);
        int slot = 1 - header_slot_;
        std::vector<std::byte> page(page_size);
        std::memcpy(page.data(), &h, sizeof h);
        main_->write_at(static_cast<std::uint64_t>(slot) * page_size, page);
        // The next log starts empty; synced with the header (file_format.hpp).
        write_mark(h.checkpoint_gen + 1, txn_seq_, wal_frames_offset);
        main_->sync();
        header_ = h;
        header_slot_ = slot;
    } catch (const error& e) {
        // The header may or may not have reached the disk; only a reopen can tell.
        poison_by_checkpoint("writing the main file's header", e);
        throw;
    }
    std::uint64_t touched_groups = touched.empty() ? 0 : touched.rbegin()->first + 1;
    groups_.resize(std::max({groups, touched_groups, static_cast<std::uint64_t>(groups_.size())}),
                   group_sums{checksum_page{}, -1});
    for (auto& [g, sums] : touched) groups_[g] = sums;
    wal_index_.clear();
    // Readers of this log read its pages from the main file from now on;
    // only then may the log be overwritten.
    if (readers_) readers_->publish_checkpointed(header_.checkpoint_gen);
    try {
        reset_wal(header_.checkpoint_gen + 1, next_salt);
    } catch (const error& e) {
        poison_by_checkpoint("starting the next log", e);  // appending to the old generation would be discarded on reopen
        throw;
    }
    if (readers_) publish();
    ++stats_.checkpoints;
    return std::nullopt;
}

// A checkpoint that failed where this handle cannot tell what the disk
// holds. Every commit it has returned is durable (the log holds them, and a
// reopen finds them), so the commit that ran the checkpoint still returns.
void file_store::poison_by_checkpoint(const char* step, const error& cause) {
    poisoned_ = true;
    poisoned_by_ = "the checkpoint after commit " + std::to_string(txn_seq_) + " failed " + step + " (" +
                   cause.what() + "), so this handle cannot tell what the disk holds; commit " +
                   std::to_string(txn_seq_) + " and every one before it are durable";
}

void file_store::reset_wal(std::uint64_t generation, std::uint64_t salt) {
    next_reader_wait_ = 0;  // a threshold in this log's bytes
    wal_header h{};
    std::memcpy(h.magic, wal_magic, sizeof h.magic);
    h.version = wal_format_version;
    h.page_size = page_size;
    std::memcpy(h.store_id, header_.store_id, sizeof h.store_id);
    h.generation = generation;
    h.salt = salt;
    h.crc = struct_crc(h);
    wal_->write_at(0, {reinterpret_cast<const std::byte*>(&h), sizeof h});
    wal_->sync();  // as the checkpoint's, whatever durable says
    wal_header_ = h;
    wal_end_ = wal_frames_offset;
    wal_chain_ = chain_seed(salt);
    wal_commits_ = 0;
    wal_needs_reset_ = false;
    discard_pending();
    shrink_log();
}

// The log keeps the size of the largest transaction since it was created, and
// opening a store reads all of it (examine_tail), so after
// a big transaction is checkpointed the log is cut back. What is cut holds
// only frames of older generations, so losing the cut in a crash is harmless.
void file_store::shrink_log() {
    std::uint64_t keep = std::max<std::uint64_t>(retained_log_units * opts_.log_growth, wal_frames_offset);
    if (wal_allocated_ <= keep) return;
    wal_->truncate(keep);
    wal_allocated_ = keep;
}

// 6. Describe and check ----------------------------------------------------

bool file_store::wait_for_commit(std::chrono::milliseconds timeout) const {
    if (!opts_.read_only)
        throw error(errc::invalid_argument, path_ + " is open for writing: it always has its newest commit");
    if (!readers_) {
        // Opened without a reader table: this reader's shared flock keeps
        // every writer out, so no commit can come while it is open.
        std::this_thread::sleep_for(timeout);
        return false;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    snapshot seen = snapshot_;  // a checkpoint republishes the same commit: wait on past it
    for (;;) {
        const auto left = std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                      deadline - std::chrono::steady_clock::now()));
        std::optional<snapshot> published = readers_->wait_for_publish(seen, left);
        if (!published) return false;
        if (published->txn > txn_seq_ ||
            std::memcmp(published->store_id, header_.store_id, sizeof header_.store_id) != 0)
            return true;
        seen = *published;
    }
}

// Both handles read the main file as of their headers and the log of one
// generation. A main file not checkpointed between them is the same file
// (invariant 2: a checkpoint starts a new generation), so the pages that
// differ are the log entries that differ; a main file checkpointed at
// exactly older's commit (invariant 5 lets a checkpoint run past a live
// reader's snapshot only when it is the newest) holds older's snapshot, so
// the pages that differ are this log's. Anything else (another store under
// the name, as compaction leaves) cannot be compared.
std::optional<std::vector<page_no>> file_store::changed_since(const storage& older_store) const {
    const auto* older = dynamic_cast<const file_store*>(&older_store);
    if (!older || std::memcmp(older->header_.store_id, header_.store_id, sizeof header_.store_id) != 0)
        return std::nullopt;
    const std::vector<log_index::entry> now = wal_index_.newest();
    std::vector<page_no> changed;
    const bool same_main = older->header_.checkpoint_gen == header_.checkpoint_gen &&
                           older->header_.txn_seq == header_.txn_seq &&
                           older->wal_header_.generation == wal_header_.generation &&
                           older->wal_header_.salt == wal_header_.salt;
    if (same_main) {
        // Within a generation the index only grows: every page older's has,
        // this one has, at the same or a newer frame.
        if (older->wal_index_.distinct() > wal_index_.distinct()) return std::nullopt;
        for (const log_index::entry& e : now) {
            log_index::entry was;
            if (!older->wal_index_.find(e.page, was) || was.where != e.where || was.sum != e.sum)
                changed.push_back(e.page);
        }
        return changed;  // ascending, as newest() is
    }
    if (header_.txn_seq != older->txn_seq_ || header_.checkpoint_gen < older->wal_header_.generation)
        return std::nullopt;
    for (const log_index::entry& e : now) changed.push_back(e.page);
    return changed;
}

info file_store::describe() const {
    return info{format_version,
                static_cast<std::uint32_t>(page_size),
                common::hex(header_.store_id),
                page_count_,
                main_->size(),
                wal_ ? wal_->size() : 0,
                wal_header_.generation,
                wal_end_ - wal_frames_offset,
                wal_commits_,
                wal_index_.distinct(),
                txn_seq_,
                header_.header_seq,
                mark_counts() ? mark_.txn : 0,
                readers_ ? readers_->live_readers() : std::vector<reader_info>{}};
}

std::vector<std::string> file_store::check() const {
    std::vector<std::string> findings = check_slots();
    // A reader beside the writer may read a slot or the mark while the
    // writer rewrites it: a finding counts only if it stays.
    for (int again = 0; !findings.empty() && readers_ && opts_.read_only && again < 20; ++again) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        findings = check_slots();
    }
    check_readers(findings);
    std::vector<std::byte> page(page_size);
    read_failure why;
    for (page_no p = 0; p < page_count_; ++p) {
        if (!read_page_nothrow(p, page.data(), &why)) findings.push_back(why.message);
    }
    return findings;
}

// The header slots, the checksum slots, the commit mark and the log header.
std::vector<std::string> file_store::check_slots() const {
    std::vector<std::string> findings;
    {
        std::lock_guard<const common::spin_lock> hold(pending_lock_);
        for (const std::string& f : pending_.check()) findings.push_back(path_ + ": spilled pages: " + f);
    }
    for (const std::string& f : wal_index_.check()) findings.push_back(path_ + ": committed log pages: " + f);
    std::byte buf[2 * page_size] = {};
    main_->read_at(0, buf);
    for (int i = 0; i < 2; ++i) {
        file_header h;
        std::memcpy(&h, buf + i * page_size, sizeof h);
        slot_state s = check_header_slot(h);
        bool never_written = i == 1 && header_.header_seq == 1 && all_zero(buf + page_size, page_size);
        if (s != slot_state::ok && !never_written)
            findings.push_back(path_ + ": header slot " + std::to_string(i) + " (page " + std::to_string(i) +
                               ") is damaged: " + describe_slot(s));
    }
    for (std::uint64_t g = 0; g < groups_.size(); ++g) {
        for (int slot = 0; slot < 2; ++slot) {
            // A checkpoint a crash cut short may leave the slot not in use
            // torn, with the commits it was copying still in the log: the
            // format is made for it (the slot in use stays valid, and the
            // next checkpoint rewrites the other), so it is no damage then.
            // (Damage to the newer slot of a checkpoint that completed makes
            // the older one serve, and its pages fail their sums.)
            if (wal_commits_ > 0 && groups_[g].slot >= 0 && slot != groups_[g].slot) continue;
            checksum_page copy;
            bool valid = read_group_slot(g, slot, copy);
            if (!valid && !all_zero(reinterpret_cast<std::byte*>(&copy), page_size))
                findings.push_back(path_ + ": checksum page of group " + std::to_string(g) + " slot " +
                                   std::to_string(slot) + " (file page " + std::to_string(checksum_slot_page(g, slot)) +
                                   ") is damaged");
        }
    }
    commit_mark m{};
    std::size_t n = main_->read_at(commit_mark_page * page_size, {reinterpret_cast<std::byte*>(&m), sizeof m});
    bool mark_valid = n == sizeof m && m.magic == commit_mark_magic && m.crc == struct_crc(m) &&
                      std::memcmp(m.store_id, header_.store_id, sizeof m.store_id) == 0;
    if (!mark_valid)
        findings.push_back(path_ + ": the commit mark (page 2) is damaged; until the next checkpoint rewrites it, "
                                   "damage to the log's last commit could pass for a torn tail");
    if (wal_needs_reset_ && wal_commits_ > 0)
        findings.push_back(wal_path_ + ": the log header (bytes 0-55) is damaged; its " + std::to_string(wal_commits_) +
                           " commits were read with the generation and salt the main file records, and a writable "
                           "open rewrites it");
    return findings;
}

// Invariant 5 as the writer's reader table shows it: every live reader's
// snapshot is a commit the main file and this log still hold.
void file_store::check_readers(std::vector<std::string>& findings) const {
    if (!readers_ || opts_.read_only) return;
    for (const reader_info& r : readers_->live_readers()) {
        if (r.generation == 0) continue;  // still registering
        std::string who = readers_->path() + ": reader process " + std::to_string(r.pid) + " at commit " +
                          std::to_string(r.txn) + " (log generation " + std::to_string(r.generation) + ", byte " +
                          std::to_string(r.log_end) + ")";
        bool held_whole = r.generation == header_.checkpoint_gen && r.txn == header_.txn_seq;
        bool in_log = r.generation == wal_header_.generation && r.log_end <= wal_end_ && r.txn <= txn_seq_ &&
                      r.txn >= header_.txn_seq;
        if (!held_whole && !in_log)
            findings.push_back(who + ": neither the main file nor the log holds that snapshot (invariant 5)");
    }
}

}  // namespace steppe::storage
