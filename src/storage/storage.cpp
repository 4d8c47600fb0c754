// storage::open: the page store a name selects (storage.hpp).
#include "storage/storage.hpp"

#include "storage/file_store.hpp"
#include "storage/pg_store.hpp"

namespace steppe::storage {

storage::~storage() = default;

std::unique_ptr<storage> storage::open(const std::string& path, const options& opts) {
    if (is_postgres_url(path)) return pg_store::open(path, opts);
    return file_store::open(path, opts);
}

void storage::commit_rewrite(const page_fill&) {
    throw error(errc::unsupported, path_ + ": a store in files is rewritten as a new main file (rewrite_store), not "
                                           "by a commit");
}

std::optional<std::vector<page_no>> storage::changed_since(const storage&) const { return std::nullopt; }

void check_page_numbers(std::span<const page_image> pages, const std::string& path) {
    for (const page_image& p : pages)
        if (p.page >= max_pages)
            throw error(errc::invalid_argument, path + ": page " + std::to_string(p.page) + " is beyond the " +
                                                    std::to_string(max_pages) + " pages a store can hold");
}

void refuse_zero_meta_after_commits(const storage& s) {
    if (s.txn_seq() == 0) return;
    throw error(errc::corrupt, "store " + s.path() + ": its header's engine data is all zeros, as only a new store's "
                                   "is, but the header counts " + std::to_string(s.txn_seq()) + " commits and " +
                                   std::to_string(s.page_count()) +
                                   " pages: the header is damaged (nothing was changed; restore the store from a "
                                   "backup)");
}

void checkpoint_at_close(storage& s) {
    try {
        s.discard_pending();
        s.try_checkpoint();  // a reader holding an older snapshot defers it to the next open
    } catch (const error& e) {
        throw error(e.code(), "closing " + s.path() +
                                  ": the checkpoint failed, so the log keeps its commits (the next open recovers "
                                  "them): " + e.what());
    }
}

}  // namespace steppe::storage
