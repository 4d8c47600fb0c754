// A std::thread that is running its body when the constructor returns.
#pragma once

#include <future>
#include <thread>
#include <utility>

namespace steppe::common {

// A new thread is still being set up when std::thread returns: the C
// library and a sanitizer's runtime do that in the thread itself, and
// AddressSanitizer's set-up allocates. A program that forked right after
// opening a store (the store's threads start last in open) gave its child
// a lock that set-up held, and the child's first allocation waited forever
// (GCC 12's AddressSanitizer allocator has no fork handlers; CI of stop 32:
// a signal sent at the fork found the new eviction thread inside glibc's
// start_thread every time, and 1 run in 4-5 under load hung). The store's
// fork handlers hold its threads between their passes, which they can do
// only once the threads run their bodies: so each starts through this,
// which returns when the body has begun (0 hangs in 16 runs after).
template <typename Body>
std::thread start_thread(Body body) {
    std::promise<void> running;  // its shared state is on the heap: the thread may touch it after we return
    std::future<void> begun = running.get_future();
    std::thread t([running = std::move(running), body = std::move(body)]() mutable {
        running.set_value();
        body();
    });
    begun.wait();
    return t;
}

}  // namespace steppe::common
