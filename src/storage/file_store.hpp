// The file page store (storage.hpp): a main file of checksummed pages, a
// write-ahead log beside it, atomic durable commits, recovery, checkpoints
// and locking.
//
// Commit state machine (one writer; see docs/format.md):
//
//   open ── recover() ──► ready ── commit() ──► ready
//                          │  ▲                    │ write failed: log tail is
//                          │  └── checkpoint() ◄───┘ torn, state unchanged
//                          └── fdatasync failed ──► poisoned (every call throws
//                                                   errc::poisoned; reopen);
//                              so does a durable commit whose pages could not
//                              be indexed (no memory)
//
// Invariants:
//  (1) the committed state = main file as of its header + every complete
//      commit in the log of generation checkpoint_gen + 1, in order;
//  (2) the log is reset (new generation) only after the main file holding
//      all its commits is durable, and the main header saying so is durable;
//  (3) every page image handed out was verified against its checksum;
//  (4) a transaction is dropped at recovery only if nothing shows it committed
//      (judge_log; the commit mark and later frames are what shows it);
//  (5) a live reader's snapshot never changes under it (readers beside the
//      writer, reader_table.hpp): a checkpoint copies pages into the main
//      file only while every live reader is at the newest commit (so none
//      reads those pages from the main file), and a log generation is
//      overwritten only after the reader table says the main file holds it
//      whole (its readers then read its pages from there: read_logged).
//      check_readers() checks what the table shows of it.
#pragma once

#include "storage/storage.hpp"

#include <atomic>
#include <chrono>
#include <optional>

#include "common/sigsafe.hpp"
#include "storage/file_format.hpp"
#include "storage/io.hpp"
#include "storage/log_index.hpp"
#include "storage/read_around.hpp"
#include "storage/reader_table.hpp"
#include "storage/wal_format.hpp"

namespace steppe::storage {

class file_store final : public storage {
public:
    // Opens (or creates) the store at `path`; recovers from the log. Throws
    // not_found, version, corrupt, locked, permission, io.
    static std::unique_ptr<file_store> open(const std::string& path, const options& opts);
    ~file_store() override;

    void read_page(page_no page, std::byte* out) const override;
    // With `read_around`, a main-file page that is not in the page cache
    // comes with the cluster read_around_ sizes.
    bool read_page_nothrow(page_no page, std::byte* out, read_failure* why,
                           bool read_around = false) const noexcept override;
    bool read_committed_page_nothrow(page_no page, std::byte* out, read_failure* why,
                                     bool read_around = false) const noexcept override;
    // Asks the OS to start reading `page`'s newest version.
    void prefetch(page_no page) const noexcept override;
    std::uint64_t waited_reads() const noexcept override { return waited_reads_.load(std::memory_order_relaxed); }
    void commit(std::span<const page_image> pages, const meta_bytes& meta) override;
    void spill(std::span<const page_image> pages) override;
    void discard_pending() noexcept override;
    void remove_if_made_by_open() noexcept override;
    bool is_pending(page_no page) const noexcept override {
        wal_entry unused;
        return find_pending(page, unused);
    }
    std::size_t pending_count() const noexcept override;
    std::vector<page_no> pending_pages() const override;
    // Copies the log's pages into the main file and resets the log; a live
    // reader at an older snapshot defers it (invariant 5).
    void checkpoint() override;
    bool try_checkpoint() override;
    // Sleeps on the reader table's futex, which the writer wakes when it
    // publishes.
    bool wait_for_commit(std::chrono::milliseconds timeout) const override;
    std::optional<std::vector<page_no>> changed_since(const storage& older) const override;
    info describe() const override;
    memory memory_bytes() const noexcept override;
    std::vector<std::string> check() const override;

private:
    struct wal_entry {
        log_index::location at;  // of the page image, or its difference, in the log
        std::uint32_t sum;       // the image's page_checksum
    };
    // Where the next frame goes: after the last commit, or after the frames
    // the transaction in progress has spilled.
    struct log_tail {
        std::uint64_t end;
        std::uint32_t chain;
        std::uint64_t frames;  // page frames of the transaction in progress
        page_no page_count;
    };
    struct group_sums {
        checksum_page page;
        int slot;  // which slot holds the newest valid copy; -1 = none written yet
    };

    file_store(std::string path, const options& opts);
    // Readers beside the writer (reader_table.hpp, invariant 5).
    enum class snapshot_fit { fits, moved, stale, damaged };
    // `writer_holds_lock`: the store's lock was refused, so a writer is live
    // (false before the lock is tried).
    bool open_beside_writer(bool writer_holds_lock);
    // Why the last open_beside_writer() read no snapshot from the table;
    // with `_locked`, a locked error met while using the table (every slot
    // held, a writer by another name or in this process, a snapshot left
    // half written), which the open throws as it is.
    std::string beside_writer_refusal_;
    bool beside_writer_refusal_locked_ = false;
    snapshot_fit load_snapshot();
    bool commits_beyond_this_table();
    bool log_goes_on_without_a_writer();
    [[noreturn]] void throw_published_commits_damaged() const;
    snapshot_fit load_main_only();
    bool checksums_in_flux() const;
    bool log_header_is(std::uint64_t generation, std::uint64_t salt) const;
    void adopt_reader_table(bool make);
    void publish();
    bool log_overtaken() const noexcept;
    void check_readers(std::vector<std::string>& findings) const;
    std::vector<std::string> check_slots() const;
    bool read_logged(page_no page, const wal_entry& e, std::byte* out, common::fixed_message& msg,
                     read_failure* why) const noexcept;
    long read_main_page(page_no page, std::byte* out, bool read_around) const noexcept;
    long read_log_version(page_no page, const wal_entry& e, std::byte* out, bool& malformed) const noexcept;
    long diff_against_main(const page_image& p, std::uint64_t main_bytes, std::byte* diff) const;
    void create_files();
    void load_header();
    void load_checksums();
    void outrank_stale_copies(std::uint64_t group, group_sums& sums) const;
    void check_backed(page_no count) const;
    void check_nothing_past_the_count() const;
    bool missing_log_held_commits() const { return mark_counts() && mark_.txn > header_.txn_seq; }
    std::string missing_log_message() const;
    void accept_missing_log();
    void extend_log(std::uint64_t needed);
    void load_mark();
    bool mark_counts() const;
    void write_mark(std::uint64_t generation, std::uint64_t txn, std::uint64_t log_end);
    void note_commit_in_mark();
    void ask_for_the_log();
    void open_wal();
    void open_missing_wal();
    const char* read_frame(std::uint64_t offset, frame_header& h, std::byte* payload) const;
    void replay_wal();
    void replay_frames(std::uint64_t limit);
    void replay_from(std::uint64_t limit);
    bool resume_after(const snapshot& s);
    // What the log shows past the point where replay stopped (see wal_format.hpp).
    struct tail_evidence {
        std::uint64_t shown_txn = 0;            // commits up to this one were durable
        std::string proof;                      // why we know
        std::uint64_t last_seen_txn = 0;        // the newest intact frame's commit past the stop
        std::vector<page_no> pages;             // pages of intact frames past the stop
    };
    tail_evidence examine_tail(std::uint64_t from) const;
    void judge_log();
    void salvage(const std::string& what);
    std::string copy_log_aside();
    void poison_by_checkpoint(const char* step, const error& cause);
    std::optional<reader_info> checkpoint_now(bool even_if_empty);
    void wait_for_readers_and_checkpoint();
    void reset_wal(std::uint64_t generation, std::uint64_t salt);
    void shrink_log();
    void plan_main_file_reads();
    // A reset log keeps this many log_growth steps (a session of small
    // commits) and gives the rest back: every open reads all of the log
    // (examine_tail), and 4 steps were most of a small store's cold open.
    static constexpr std::uint64_t retained_log_units = 1;
    // What a page read that misses the page cache brings in around it
    // (read_around.hpp): sized by what it was worth so far.
    mutable read_around around_;
    // The main file's bytes asked for whole at open (0: none), which a
    // WILLNEED of a page among them would only ask for again: a cold OO1
    // small traversal made 670 such calls.
    std::uint64_t asked_whole_bytes_ = 0;
    bool asked_at_open(std::uint64_t offset) const noexcept { return offset < asked_whole_bytes_; }
    mutable std::atomic<std::uint64_t> waited_reads_{0};
    // The append buffer is kept for the next write up to this many frames
    // (the page engine writes at most 1,024 pages at a time but for its
    // last commit chunk with the heap's and blobs' pages).
    static constexpr std::uint64_t retained_append_frames = 1100;
    log_tail append(std::span<const page_image> pages, const meta_bytes* meta,
                    std::vector<std::pair<page_no, wal_entry>>& entries);
    void write_header();
    void ensure_usable() const;
    bool read_group_slot(std::uint64_t group, int slot, checksum_page& out) const;
    std::uint32_t expected_sum(page_no page) const noexcept;
    bool find_pending(page_no page, wal_entry& out) const noexcept;
    static std::vector<log_index::entry> index_entries(std::span<const std::pair<page_no, wal_entry>> entries);
    void index_committed(std::span<const std::pair<page_no, wal_entry>> entries);
    bool read_version(page_no page, std::byte* out, read_failure* why, bool read_around,
                      bool with_pending) const noexcept;

    std::string wal_path_;
    options opts_;
    env* io_;
    std::unique_ptr<lock_handle> lock_;
    std::unique_ptr<file> main_, wal_;
    // NAME-shm: the writer's, or a reader's slot beside a writer; null for
    // a reader under shared flocks (no usable table).
    std::unique_ptr<reader_table> readers_;
    std::vector<std::string> made_by_open_;  // the files a creating open made
    snapshot snapshot_{};  // such a reader's registered snapshot

    file_header header_{};                 // newest valid header slot
    int header_slot_ = 0;
    std::vector<group_sums> groups_;       // checksums of main-file pages, by group
    log_index wal_index_;                              // newest committed version in the log
    wal_header wal_header_{};
    std::uint64_t wal_end_ = wal_frames_offset;  // end of the last complete commit
    std::uint64_t next_reader_wait_ = 0;  // log bytes past which a deferred checkpoint waits again (0 after a reset)
    std::uint32_t wal_chain_ = 0;                // chain checksum at wal_end_
    std::uint64_t wal_commits_ = 0;
    std::uint64_t replay_stop_ = wal_frames_offset;  // where replay met the first frame it could not take
    std::string replay_stop_reason_;
    bool wal_needs_reset_ = false;                // its header is damaged or of an older generation
    commit_mark mark_{};                           // the main file's commit mark, as last read or written
    bool mark_valid_ = false;
    std::string missing_log_accepted_;  // recover of a log missing beside a mark that cannot say what it held
    log_index pending_;                            // spilled by the transaction in progress
    common::spin_lock pending_lock_;  // pending_ between spill() and the fault path's readers
    std::uint64_t wal_allocated_ = 0;                  // the log file's size: zeros past the frames
    std::vector<std::byte> append_buffer_;
    log_tail tail_{wal_frames_offset, 0, 0, 0};

    bool poisoned_ = false;
    std::string poisoned_by_ = "an earlier fdatasync failed, so what is on disk is unknown";  // for ensure_usable
};

}  // namespace steppe::storage
