// perf_counters.hpp — hardware event counts around a stretch of code, for the
// experiments' instruction and cache-miss columns (Hosking 1995, digest 001):
//
//   perf_counters pc;          // opens what the machine exposes, user space only
//   pc.start(); work(); pc.stop();
//   pc.to_json(runs)           // per run: instructions, cycles, cache misses, ...
//
// Each event is opened on its own with perf_event_open(2) (exclude_kernel, so
// perf_event_paranoid 2 allows it), and each one that cannot be opened says
// why (a virtual machine without a virtual PMU gives ENOENT for every
// hardware event): the report shows "unavailable" with that reason, never a
// number. Beside them, always, the time-stamp counter (rdtsc, x86-64): TSC
// ticks are reference cycles at the TSC's constant rate, not core clock
// cycles, and include the kernel's time; tsc_hz is calibrated against the
// steady clock at start.
#pragma once

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "harness.hpp"

namespace bench {

inline std::uint64_t tsc_now() noexcept {
#if defined(__x86_64__)
    _mm_lfence();
    std::uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
#else
    return static_cast<std::uint64_t>(clock_type::now().time_since_epoch().count());
#endif
}

// TSC ticks per second, measured once against the steady clock (20 ms).
inline double tsc_hz() {
    static double hz = [] {
        auto t0 = clock_type::now();
        std::uint64_t c0 = tsc_now();
        while (ms_since(t0) < 20) {
        }
        double ms = ms_since(t0);
        std::uint64_t c1 = tsc_now();
        return static_cast<double>(c1 - c0) / (ms / 1000.0);
    }();
    return hz;
}

class perf_counters {
public:
    struct event {
        event(const char* n, std::uint32_t t, std::uint64_t c) : name(n), type(t), config(c) {}
        const char* name;
        std::uint32_t type;
        std::uint64_t config;
        int fd = -1;
        std::string why;  // empty when open
        std::uint64_t value = 0;
    };

    perf_counters() {
        auto cache = [](std::uint64_t id, std::uint64_t op, std::uint64_t result) {
            return id | (op << 8) | (result << 16);
        };
        events_ = {
            {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
            {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
            {"cache_references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES},
            {"cache_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
            {"l1i_misses", PERF_TYPE_HW_CACHE,
             cache(PERF_COUNT_HW_CACHE_L1I, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS)},
            {"l1d_read_misses", PERF_TYPE_HW_CACHE,
             cache(PERF_COUNT_HW_CACHE_L1D, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS)},
        };
        for (auto& e : events_) {
            perf_event_attr a{};
            a.size = sizeof a;
            a.type = e.type;
            a.config = e.config;
            a.disabled = 1;
            a.exclude_kernel = 1;
            a.exclude_hv = 1;
            long fd = ::syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
            if (fd < 0) {
                int err = errno;
                e.why = std::string("perf_event_open: ") + std::strerror(err);
                if (err == ENOENT || err == EOPNOTSUPP)
                    e.why += " (no hardware PMU exposed: a virtual machine without a virtual PMU?)";
                else if (err == EACCES || err == EPERM)
                    e.why += " (kernel.perf_event_paranoid forbids it)";
            } else {
                e.fd = static_cast<int>(fd);
            }
        }
    }
    ~perf_counters() {
        for (auto& e : events_)
            if (e.fd >= 0) ::close(e.fd);
    }
    perf_counters(const perf_counters&) = delete;
    perf_counters& operator=(const perf_counters&) = delete;

    double last_ms() const { return ms_; }

    bool any_hardware() const {
        for (const auto& e : events_)
            if (e.fd >= 0) return true;
        return false;
    }

    void start() {
        for (auto& e : events_)
            if (e.fd >= 0) {
                ::ioctl(e.fd, PERF_EVENT_IOC_RESET, 0);
                ::ioctl(e.fd, PERF_EVENT_IOC_ENABLE, 0);
            }
        t0_ = clock_type::now();
        tsc0_ = tsc_now();
    }
    void stop() {
        std::uint64_t tsc1 = tsc_now();
        ms_ = ms_since(t0_);
        tsc_ = tsc1 - tsc0_;
        for (auto& e : events_)
            if (e.fd >= 0) {
                ::ioctl(e.fd, PERF_EVENT_IOC_DISABLE, 0);
                std::uint64_t v = 0;
                e.value = ::read(e.fd, &v, sizeof v) == static_cast<ssize_t>(sizeof v) ? v : 0;
            }
    }

    // Per run (the stretch between start and stop divided by `runs`):
    // {"runs", "ms", "tsc_cycles", "tsc_hz", "hardware": bool, "<event>": n or
    // null, "unavailable": {"<event>": why}}.
    json to_json(int runs) const {
        json j;
        double n = runs > 0 ? runs : 1;
        j.set("runs", runs).set("ms", ms_ / n).set("tsc_cycles", static_cast<double>(tsc_) / n);
        j.set("tsc_hz", tsc_hz()).set("hardware", any_hardware());
        json why;
        bool any_why = false;
        for (const auto& e : events_) {
            if (e.fd >= 0) {
                j.set(e.name, static_cast<double>(e.value) / n);
            } else {
                j.set(e.name, nullptr);
                why.set(e.name, e.why);
                any_why = true;
            }
        }
        if (any_why) j.set("unavailable", why);
        return j;
    }

private:
    std::vector<event> events_;
    clock_type::time_point t0_{};
    std::uint64_t tsc0_ = 0, tsc_ = 0;
    double ms_ = 0;
};

}  // namespace bench
