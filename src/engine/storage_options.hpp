// The storage manager's options from an engine's open options (both
// engines' option structs name these fields alike), and its checkpoint and
// server counters into an engine's store_stats.
#pragma once

#include <steppe/steppe.hpp>

#include "storage/storage.hpp"

namespace steppe {

template<class Options> storage::options storage_options(const Options& o, storage::env* io = nullptr) {
    storage::options so;
    so.create = o.create;
    so.read_only = o.read_only;
    so.durable = o.durable;
    so.checkpoint_bytes = o.checkpoint_bytes;
    so.salvage = o.salvage_damaged_log;
    so.log_diffs = o.log_diffs;
    so.checkpoint_wait = o.checkpoint_wait;
    // Opening options the object engine's struct does not have (yet).
    if constexpr (requires { o.exclusive_create; }) so.exclusive_create = o.exclusive_create;
    if constexpr (requires { o.lock_timeout; }) so.lock_timeout = o.lock_timeout;
    so.io = io;
    return so;
}

inline void copy_storage_counters(const storage::stats& from, store_stats& to) {
    to.checkpoints = from.checkpoints;
    to.checkpoints_deferred = from.checkpoints_deferred;
    to.checkpoint_waits = from.checkpoint_waits;
    to.checkpoint_waits_expired = from.checkpoint_waits_expired;
    to.server_round_trips = from.server_round_trips;
    to.server_fetches = from.server_fetches;
    to.server_pages_fetched = from.server_pages_fetched;
    to.cache_file_hits = from.cache_file_hits;
}

}  // namespace steppe
