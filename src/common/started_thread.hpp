// A std::thread that is running its body when the constructor returns.
#pragma once

#include <pthread.h>
#include <signal.h>

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
//
// The thread starts with every signal blocked but the synchronous ones (a
// fault it causes itself): a signal sent to the process goes to one of the
// program's threads, as if steppe had none. A SIGALRM handler that read
// store memory ran on the eviction thread in the middle of a batch, faulted
// on a page that thread held, and waited for it forever (a tester's finding).
template <typename Body>
std::thread start_thread(Body body) {
    std::promise<void> running;  // its shared state is on the heap: the thread may touch it after we return
    std::future<void> begun = running.get_future();
    sigset_t all, before;
    sigfillset(&all);
    for (int synchronous : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&all, synchronous);
    pthread_sigmask(SIG_SETMASK, &all, &before);  // the new thread inherits the mask
    struct restore {
        const sigset_t& mask;
        ~restore() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
    } restore_after{before};
    std::thread t([running = std::move(running), body = std::move(body)]() mutable {
        running.set_value();
        body();
    });
    begun.wait();
    return t;
}

}  // namespace steppe::common
