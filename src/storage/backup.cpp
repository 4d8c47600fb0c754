// storage::backup (backup.hpp). The steps, each durable before the next:
//   1. open `source` read-only: a snapshot of its last commit (reader table,
//      invariant 5: the writer's checkpoints keep the versions it reads)
//   2. write a new main file at DEST.backup-PID (write_main_file: every page
//      written, read in batches of `batch_pages`, goes once to its place;
//      then the source's meta in the header; one fdatasync. A crash leaves
//      a file under a name no one opens, which is not a store until renamed)
//   3. rename it to DEST and sync the directory
//   4. open DEST read-only and check it
#include "storage/backup.hpp"

#include <steppe/error.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

namespace steppe::storage {

namespace {
constexpr std::size_t batch_pages = 1024;  // 4 MiB of page images per commit

bool all_zero(const std::byte* page) {
    return std::all_of(page, page + page_size, [](std::byte b) { return b == std::byte{0}; });
}

// The files a store at `path` has besides its main file.
std::array<std::string, 3> companions(const std::string& path) {
    return {path + "-wal", path + "-lock", path + "-shm"};
}

void remove_store(env& io, const std::string& path) noexcept {
    for (const std::string& f : companions(path)) {
        try {
            if (io.exists(f)) io.remove(f);
        } catch (...) {  // best effort: a leftover companion is removed by the next attempt's name check
        }
    }
    try {
        if (io.exists(path)) io.remove(path);
    } catch (...) {
    }
}

// The pages written, read in batches of batch_pages and handed to `put`.
std::uint64_t copy_pages(const storage& from, const std::function<void(std::span<const page_image>)>& put) {
    std::vector<std::byte> buffer(batch_pages * page_size);
    std::vector<page_image> batch;
    std::uint64_t copied = 0;
    page_no count = from.page_count();
    for (page_no p = 0; p < count; ++p) {
        std::byte* slot = buffer.data() + batch.size() * page_size;
        read_failure why;
        if (!from.read_committed_page_nothrow(p, slot, &why, true)) throw error(why.code, why.message);
        // A page never written reads as zeros in the copy too; the last one
        // is written whatever it holds, so the copy has the same page count.
        if (all_zero(slot) && p + 1 != count) continue;
        batch.push_back({p, slot});
        ++copied;
        if (batch.size() == batch_pages) {
            put(batch);
            batch.clear();
        }
    }
    if (!batch.empty()) put(batch);
    return copied;
}

// A step that makes local files, asked of a store in PostgreSQL.
void require_files(const std::string& path, const char* what) {
    if (path.empty()) throw error(errc::invalid_argument, std::string(what) + ": no file named (an empty name)");
    if (is_postgres_url(path))
        throw error(errc::unsupported, path + ": " + what +
                                           " makes local files, and this store lives in PostgreSQL (for a local "
                                           "copy: steppe backup URL FILE; into PostgreSQL: steppe import FILE URL)");
}
}  // namespace

backup_result backup(const std::string& source, const std::string& dest, env* io) {
    require_files(dest, "a backup");
    if ((io ? *io : posix_env()).exists(dest))  // before the source is opened: the cheap refusal first
        throw error(errc::exists, "backup of " + source + ": " + dest + " exists already; name a new file");
    options reader;
    reader.read_only = true;
    reader.create = false;
    reader.io = io;
    return backup_from(*storage::open(source, reader), dest, io);
}

backup_result backup_from(const storage& from, const std::string& dest, env* io) {
    require_files(dest, "a backup");
    env& files = io ? *io : posix_env();
    const std::string& source = from.path();
    if (files.exists(dest))
        throw error(errc::exists, "backup of " + source + ": " + dest + " exists already; name a new file");
    // A log left by a store once at DEST would be replayed into the copy, or
    // refused as another store's, once the copy is renamed there.
    for (const std::string& f : companions(dest))
        if (files.exists(f))
            throw error(errc::exists, "backup of " + source + ": " + f + " exists, left by a store once named " +
                                          dest + " (or held by one being made there); remove it if that store "
                                          "is gone, or name another file (nothing was written)");
    options reader;
    reader.read_only = true;
    reader.create = false;
    reader.io = io;
    backup_result r;
    r.pages = from.page_count();
    r.txn = from.txn_seq();
    std::string temp = dest + ".backup-" + std::to_string(::getpid());
    write_main_file(temp, [&](page_sink& to) {
        r.copied = copy_pages(from, [&](std::span<const page_image> batch) { to.write(batch); });
        return from.meta();
    }, io);
    try {
        if (files.exists(dest))
            throw error(errc::exists, "backup of " + source + ": " + dest + " appeared while the backup ran");
        files.rename(temp, dest);
        files.sync_dir_of(dest);
    } catch (...) {
        remove_store(files, temp);
        throw;
    }
    std::unique_ptr<storage> made = storage::open(dest, reader);
    std::vector<std::string> findings = made->check();
    if (!findings.empty() || made->meta() != from.meta() || made->page_count() != r.pages)
        throw error(errc::corrupt, "backup of " + source + ": the copy " + dest + " does not check out (" +
                                       (findings.empty() ? std::string("its meta or size differs") : findings[0]) +
                                       "); it is left for inspection");
    return r;
}

void write_main_file(const std::string& temp, const page_fill& fill, env* io) {
    require_files(temp, "rewriting a store");
    env& files = io ? *io : posix_env();
    remove_store(files, temp);  // a crashed attempt's leftover: no store is ever opened by this name
    try {
        bulk_writer to(temp, files, options{}.file_mode);
        to.finish(fill(to));
        // The directory is synced by the rename that makes `temp` a store
        // (backup_from, replace_store), not here: until then its name counts
        // for nothing.
    } catch (...) {
        remove_store(files, temp);
        throw;
    }
}

// 1. the old log goes, durably: the old main file alone is the old store
//    (the caller checkpointed it), and no frame of the old log can ever be
//    replayed over the new main file (whose store id differs anyway)
// 2. the reader table goes (it names the old store's id and generations)
// 3. the rename, durably: the new main file alone is the new store
void replace_store(const std::string& path, const std::string& temp, env* io) {
    require_files(path, "replacing a store's files");
    env& files = io ? *io : posix_env();
    for (const std::string& f : {path + "-wal", path + "-shm"})
        if (files.exists(f)) files.remove(f);
    files.sync_dir_of(path);
    files.rename(temp, path);
    files.sync_dir_of(path);
}

backup_result import_store(const std::string& source, const std::string& dest, env* io) {
    options reader;
    reader.read_only = true;
    reader.create = false;
    reader.io = io;
    std::unique_ptr<storage> from = storage::open(source, reader);
    options writer;
    writer.io = io;
    std::unique_ptr<storage> to = storage::open(dest, writer);
    if (to->txn_seq() != 0)
        throw error(errc::exists, "import of " + source + ": " + dest + " holds a store already (commit " +
                                      std::to_string(to->txn_seq()) + "); name a new one");
    backup_result r;
    r.pages = from->page_count();
    r.txn = from->txn_seq();
    r.copied = copy_pages(*from, [&](std::span<const page_image> batch) { to->spill(batch); });
    to->commit({}, from->meta());
    std::vector<std::string> findings = to->check();
    if (!findings.empty() || to->meta() != from->meta() || to->page_count() != r.pages)
        throw error(errc::corrupt, "import of " + source + ": the copy " + dest + " does not check out (" +
                                       (findings.empty() ? std::string("its meta or size differs") : findings[0]) +
                                       ")");
    return r;
}

namespace {
compact_report rewrite_by_commit(storage& s, bool write,
                                 const std::function<compact_report(const rewrite_target& target)>& pass) {
    const info before = s.describe();
    rewrite_target target;
    if (write) target = [&](const page_fill& fill) { s.commit_rewrite(fill); };
    compact_report r = pass(target);
    r.pages_before = before.page_count;
    r.bytes_before = before.main_file_bytes;
    if (!write) {
        r.bytes_after = r.bytes_before;
        return r;
    }
    // The rewrite is committed: what follows must not report it failed. A
    // collection that fails leaves the superseded versions to the next; a
    // size that cannot be measured (the server gone since) is the most the
    // rewritten pages hold.
    s.try_checkpoint();
    try {
        r.bytes_after = s.describe().main_file_bytes;
    } catch (const error&) {
        r.bytes_after = r.pages_after * page_size;
    }
    return r;
}

// A rewrite puts a new file under one name; a store's other names (hard
// links) would keep the old one, and a program writing through them would
// go on with a store this one no longer is.
void refuse_hard_links(const std::string& path, const std::string& what) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && st.st_nlink > 1)
        throw error(errc::unsupported, what + " of " + path + ": the store's main file has " +
                                           std::to_string(st.st_nlink) + " names (hard links), and " + what +
                                           " replaces it under this one only, so the others would keep the old "
                                           "store; remove the other names first (nothing was changed)");
}
}  // namespace

compact_report rewrite_store(storage& s, const std::string& path, const std::string& what, bool write, env* io,
                             const std::function<compact_report(const rewrite_target& target)>& pass) {
    if (is_postgres_url(path)) return rewrite_by_commit(s, write, pass);
    refuse_hard_links(path, what);
    info before = s.describe();
    if (!before.readers.empty())
        throw error(errc::locked, what + " of " + path + ": reader process " + std::to_string(before.readers[0].pid) +
                                      " has the store open; " + what + " replaces its files, so it waits for every " +
                                      "reader to close");
    s.checkpoint();
    // Named by the store's id, which the rewritten store does not keep: the
    // next compaction removes only a file an earlier one of this store made
    // (one named NAME.compact may be a user's backup).
    const std::string temp = path + ".compact-" + before.store_id;
    rewrite_target target;
    if (write) target = [&](const page_fill& fill) { write_main_file(temp, fill, io); };
    compact_report r = pass(target);
    r.pages_before = before.page_count;
    r.bytes_before = before.main_file_bytes + before.wal_file_bytes;
    if (!write) {
        r.bytes_after = r.bytes_before;
        return r;
    }
    env& files = io ? *io : posix_env();
    try {
        replace_store(path, temp, io);
    } catch (...) {
        if (files.exists(temp)) files.remove(temp);
        throw;
    }
    r.bytes_after = files.open(path, open_mode::read_only, 0)->size();
    return r;
}

}  // namespace steppe::storage
