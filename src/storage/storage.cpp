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

}  // namespace steppe::storage
