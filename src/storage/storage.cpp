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

}  // namespace steppe::storage
