// The page engine (pager, stored_pointer) still names the message builder
// by its storage name; it lives in common/sigsafe.hpp.
#pragma once

#include "common/sigsafe.hpp"

namespace steppe::storage {

using fixed_message = common::fixed_message;

}  // namespace steppe::storage
