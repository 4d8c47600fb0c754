// The reader table: NAME-shm, memory shared by a store's writer and the
// readers in other processes that read it beside the writer (after SQLite's
// WAL index and LMDB's reader table). Byte layout: docs/format.md, "The
// reader table"; the structs below are the same, offsets in the comments.
//
// What it holds:
//   - the snapshot the writer published last: the log generation, its salt,
//     where the last commit ends in the log and that commit's number (under
//     a sequence lock: odd while the writer changes it);
//   - checkpointed_gen: the newest log generation the main file holds whole
//     (published once the checkpoint's header is durable, before that log is
//     overwritten);
//   - checkpoint_epoch: odd while a checkpoint runs (bumped before the writer
//     looks at the readers, and when it is done);
//   - one slot per reader: its pid and snapshot. A slot belongs to whoever
//     holds an open-file-description lock (F_OFD_SETLK) on its first byte, so
//     a killed reader's slot is free as soon as the kernel drops its lock.
//
// The protocol (storage.hpp, invariant 5):
//   reader: e1 = epoch; S = snapshot; slot = S; e2 = epoch; e1 == e2 or again.
//   writer, to checkpoint: epoch++; every live slot at the newest commit, or
//     the checkpoint waits for a later one; copy; header; checkpointed_gen;
//     reset the log; publish; epoch++.
// Every access is a sequentially consistent atomic, so either the writer's
// look at the slots sees the reader's snapshot, or the reader's second look
// at the epoch sees the checkpoint and it takes a new snapshot. A snapshot
// taken while a checkpoint runs is its newest commit (the writer commits
// nothing meanwhile), which the main file holds whole once the checkpoint
// is done.
//
// The table is not part of the store: it holds no data and may be deleted
// while no process has the store open. A writer makes it (whole, under a
// temporary name, then renamed) when it is missing or unusable; nothing
// removes it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace steppe::storage {

// A commit as a reader sees it: where it ends in which log.
struct snapshot {
    std::uint64_t store_id[2];  // the main header's store id, as two words
    std::uint64_t generation;   // the log generation (main header's checkpoint_gen + 1 when taken)
    std::uint64_t salt;         // that log's salt
    std::uint64_t log_end;      // where the commit ends in that log
    std::uint64_t txn;          // the commit
    friend bool operator==(const snapshot&, const snapshot&) = default;
};

// A live reader, as the writer sees it.
struct reader_info {
    std::uint64_t pid;
    std::uint64_t generation, log_end, txn;
    bool by_other_name = false;  // a reader of another table (a hard link): only its presence is known
    bool table_replaced = false;  // NAME-shm is another file now: readers since registered there, unseen
};

inline constexpr char reader_table_magic[8] = {'s', 't', 'e', 'p', 's', 'h', 'm', '1'};
inline constexpr std::uint32_t reader_table_version = 1;
inline constexpr std::uint32_t reader_slots = 128;
inline constexpr std::size_t reader_table_bytes = 8192;

// Page 0 of NAME-shm.
struct reader_table_header {
    char magic[8];                   //  0 reader_table_magic
    std::uint32_t version;           //  8 reader_table_version
    std::uint32_t slots;             // 12 reader_slots
    std::uint64_t seq;               // 16 sequence lock over 24..71: odd while the writer changes them
    snapshot published;              // 24 store id (16), generation, salt, log_end, txn
    std::uint64_t checkpointed_gen;  // 72 the main file holds every log generation up to this
    std::uint64_t checkpoint_epoch;  // 80 odd while a checkpoint runs
    std::uint64_t writer_pid;        // 88 the last writer (a hint for messages)
    std::uint64_t key;               // 96 random at creation, below 2^48: the byte of the main file
                                     //    this table's readers lock is presence_base + key
};
static_assert(sizeof(reader_table_header) == 104);

// Every reader of a table also holds an OFD read lock on one byte of the
// main file itself, past any data: a writer that opened the store by another
// name (a hard link: another NAME-shm) sees such a lock outside its own
// table's byte and lets its checkpoints wait.
inline constexpr std::uint64_t presence_base = std::uint64_t{1} << 62;
inline constexpr std::uint64_t presence_keys = std::uint64_t{1} << 48;

// Slot i at byte 4096 + 32 i; its lock is on that byte.
struct reader_slot {
    std::uint64_t pid;         //  0 0 = never used
    std::uint64_t generation;  //  8 the reader's snapshot
    std::uint64_t log_end;     // 16
    std::uint64_t txn;         // 24
};
static_assert(sizeof(reader_slot) == 32);
inline constexpr std::size_t reader_slots_offset = 4096;
static_assert(reader_slots_offset + reader_slots * sizeof(reader_slot) <= reader_table_bytes);

class reader_table {
public:
    // The writer's: opens STORE-shm; when it is missing or not a table of
    // this version (no reader can be using such a file), makes it if `make`,
    // else returns nullptr. Throws steppe::error naming the file.
    static std::unique_ptr<reader_table> for_writer(const std::string& store_path, mode_t mode, bool make);
    // A reader's: nullptr when there is no usable STORE-shm (no writer of
    // this version opened the store since it was made or the table
    // deleted), and `why` says which. Claims a free slot (throws locked when
    // all are in use).
    static std::unique_ptr<reader_table> for_reader(const std::string& store_path, std::string& why);
    ~reader_table();  // a reader's slot is cleared and let go (by the process that claimed it)
    reader_table(const reader_table&) = delete;
    reader_table& operator=(const reader_table&) = delete;

    const std::string& path() const { return path_; }

    // --- the writer
    // At open, before anything is written: takes over the table for a store
    // whose header names `store_id` and holds log generations up to
    // `checkpointed_gen`. A published snapshot of another store or an older
    // generation is replaced by `header_state`.
    void adopt(const snapshot& header_state, std::uint64_t checkpointed_gen);
    void publish(const snapshot& s);
    void publish_checkpointed(std::uint64_t generation);
    void begin_checkpoint();  // epoch odd, before the slots are read
    void end_checkpoint();    // epoch even
    // The first live reader whose snapshot is not (generation, log_end), or
    // a reader of the store by another name, if any.
    std::optional<reader_info> first_reader_not_at(std::uint64_t generation, std::uint64_t log_end) const;
    std::vector<reader_info> live_readers() const;

    // --- a reader
    // The published snapshot, registered in this reader's slot so that no
    // checkpoint overwrites a page version it reads (the protocol above).
    snapshot register_snapshot();
    // The commit published last (not registered): a reader compares it with
    // the main file's commit mark (file_store::commits_beyond_this_table).
    std::uint64_t published_txn() const { return read_published().txn; }
    // Async-signal-safe (a load): the newest log generation the main file holds.
    std::uint64_t checkpointed_gen() const noexcept;
    std::uint64_t checkpoint_epoch() const noexcept;
    // Sleeps until the writer publishes a snapshot other than `seen` (and
    // returns it) or `timeout` passes (nullopt). The writer wakes it (publish).
    std::optional<snapshot> wait_for_publish(const snapshot& seen, std::chrono::milliseconds timeout) const;

private:
    reader_table(std::string path, int fd, void* memory);
    static std::unique_ptr<reader_table> map(const std::string& path, int fd);
    void open_store_file(const std::string& store_path);
    void claim_slot();
    void lock_presence();
    bool readers_by_other_name() const;
    bool replaced_at_path() const;
    bool slot_live(std::uint32_t i) const;
    snapshot read_published() const;
    reader_slot read_slot(std::uint32_t i) const;

    std::string path_;
    std::string absolute_path_;  // path_ as it resolved at open (replaced_at_path)
    int fd_;
    void* memory_;
    int slot_ = -1;  // a reader's slot
    pid_t claimer_ = 0;  // the process that claimed it: the only one that clears it (a fork shares the handle)
    int store_fd_ = -1;  // the main file: a reader's presence lock, the writer's look at them
};

}  // namespace steppe::storage
