// The storage manager's options from an engine's open options (both
// engines' option structs name these fields alike).
#pragma once

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

}  // namespace steppe
