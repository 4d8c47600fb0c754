// What the running kernel offers, and the choices made from it and from the
// environment: backend, write-tracking variant. Normal code only.

#include "vm/sys.hpp"
#include "vm/uapi.hpp"

#include <steppe/error.hpp>

#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string_view>

namespace steppe::vm {

const char* to_string(backend_kind kind) noexcept {
    switch (kind) {
    case backend_kind::uffd: return "uffd";
    case backend_kind::mprotect: return "mprotect";
    }
    return "unknown";
}

const char* to_string(tracking_kind kind) noexcept {
    switch (kind) {
    case tracking_kind::wp_async: return "wp_async";
    case tracking_kind::wp_sync: return "wp_sync";
    case tracking_kind::mprotect: return "mprotect";
    }
    return "unknown";
}

namespace detail {

std::string errno_text(int err) {
    char buf[128];
    std::string text = strerror_r(err, buf, sizeof buf);  // GNU strerror_r returns the text
    if (const char* name = strerrorname_np(err)) {
        text += " (";
        text += name;
        text += ')';
    }
    return text;
}

std::string max_map_count_advice() {
    long limit = -1;
    std::ifstream("/proc/sys/vm/max_map_count") >> limit;
    long mappings = 0;
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) ++mappings;
    return "the process has most likely reached vm.max_map_count (limit " + std::to_string(limit) +
           ", mappings now " + std::to_string(mappings) +
           "): the mprotect fault backend needs a mapping per run of pages with one protection. "
           "Raise the limit (sysctl -w vm.max_map_count=1048576) or use the uffd backend "
           "(STEPPE_FAULT_BACKEND=uffd)";
}

int open_userfaultfd() noexcept {
    // UFFD_USER_MODE_ONLY (Linux >= 5.11) lets unprivileged processes in when
    // vm.unprivileged_userfaultfd=0; kernel-mode faults on missing pages then
    // fail with EFAULT, which SIGBUS mode does anyway. Older kernels say EINVAL.
    long fd = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
    if (fd < 0 && errno == EINVAL) fd = syscall(SYS_userfaultfd, O_CLOEXEC);
    if (fd >= 0) return static_cast<int>(fd);
    const int syscall_err = errno;

    // Linux >= 6.1: /dev/userfaultfd, governed by its file permissions instead.
    const int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    if (dev < 0) return -syscall_err;
    fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | UFFD_USER_MODE_ONLY);
    if (fd < 0 && errno == EINVAL) fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC);
    const int dev_err = errno;
    close(dev);
    return fd >= 0 ? static_cast<int>(fd) : -dev_err;
}

}  // namespace detail

namespace {

kernel_support probe_kernel() {
    kernel_support k;
    const int fd = detail::open_userfaultfd();
    if (fd < 0) {
        k.uffd_problem = "userfaultfd(2) and /dev/userfaultfd both refused: " + detail::errno_text(-fd) +
                         " (a seccomp filter, vm.unprivileged_userfaultfd=0 on Linux < 5.11, "
                         "or a kernel built without CONFIG_USERFAULTFD)";
    } else {
        uffdio_api api{};
        api.api = UFFD_API;
        api.features = 0;  // asking for nothing makes the kernel list everything it has
        if (ioctl(fd, UFFDIO_API, &api) != 0) {
            k.uffd_problem = "UFFDIO_API failed: " + detail::errno_text(errno);
        } else {
            k.uffd_features = api.features;
            if (api.features & UFFD_FEATURE_SIGBUS) {
                k.uffd = true;
            } else {
                k.uffd_problem = "the kernel lacks UFFD_FEATURE_SIGBUS (Linux >= 4.14 needed)";
            }
            k.uffd_wp = k.uffd && (api.features & UFFD_FEATURE_PAGEFAULT_FLAG_WP);
            k.wp_async = k.uffd_wp && (api.features & UFFD_FEATURE_WP_ASYNC);
            k.uffd_move = k.uffd && (api.features & UFFD_FEATURE_MOVE);
        }
        close(fd);
    }

    // An empty scan succeeds where PAGEMAP_SCAN exists (Linux >= 6.7); older
    // kernels have no ioctl on pagemap and answer ENOTTY.
    const int pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pagemap >= 0) {
        pm_scan_arg arg{};
        arg.size = sizeof arg;
        k.pagemap_scan = ioctl(pagemap, PAGEMAP_SCAN, &arg) == 0;
        close(pagemap);
    }
    return k;
}

// Reads an enumeration from the environment: nullopt when unset or empty,
// errc::invalid_argument for anything not in `names`.
template <typename Enum, std::size_t N>
std::optional<Enum> from_environment(const char* variable, const Enum (&values)[N]) {
    const char* text = std::getenv(variable);
    if (text == nullptr || *text == '\0') return std::nullopt;
    std::string allowed;
    for (Enum value : values) {
        if (std::string_view(text) == to_string(value)) return value;
        allowed += allowed.empty() ? "" : "|";
        allowed += to_string(value);
    }
    throw error(errc::invalid_argument, std::string("vm: ") + variable + "=" + text + " is not one of " + allowed);
}

}  // namespace

const kernel_support& kernel() {
    static const kernel_support support = probe_kernel();
    return support;
}

backend_kind choose_backend(backend_kind requested) {
    constexpr backend_kind all[] = {backend_kind::uffd, backend_kind::mprotect};
    if (auto forced = from_environment("STEPPE_FAULT_BACKEND", all)) return *forced;
    if (requested == backend_kind::uffd && !kernel().uffd) return backend_kind::mprotect;
    return requested;
}

std::vector<tracking_kind> supported_tracking(backend_kind backend) {
    const kernel_support& k = kernel();
    std::vector<tracking_kind> variants;
    if (backend == backend_kind::uffd) {
        if (!k.uffd) return variants;
        if (k.wp_async && k.pagemap_scan) variants.push_back(tracking_kind::wp_async);
        if (k.uffd_wp) variants.push_back(tracking_kind::wp_sync);
    }
    variants.push_back(tracking_kind::mprotect);
    return variants;
}

namespace detail {

tracking_kind choose_tracking(backend_kind backend, std::optional<tracking_kind> requested) {
    constexpr tracking_kind all[] = {tracking_kind::wp_async, tracking_kind::wp_sync, tracking_kind::mprotect};
    std::string source = "requested";
    if (!requested) {
        requested = from_environment("STEPPE_WRITE_TRACKING", all);
        source = "STEPPE_WRITE_TRACKING";
    }
    const std::vector<tracking_kind> variants = supported_tracking(backend);
    if (!requested) return variants.empty() ? tracking_kind::mprotect : variants.front();
    if (std::find(variants.begin(), variants.end(), *requested) != variants.end()) return *requested;

    const kernel_support& k = kernel();
    std::string why;
    if (backend == backend_kind::mprotect) {
        why = "it needs the uffd backend; the mprotect backend tracks writes with mprotect";
    } else if (*requested == tracking_kind::wp_async) {
        why = std::string("it needs UFFD_FEATURE_WP_ASYNC and PAGEMAP_SCAN (Linux >= 6.7); this kernel has ") +
              "WP_ASYNC " + (k.wp_async ? "yes" : "no") + ", PAGEMAP_SCAN " + (k.pagemap_scan ? "yes" : "no");
    } else {
        why = "it needs userfaultfd write-protection of anonymous memory (Linux >= 5.7)";
    }
    throw error(errc::unsupported, std::string("vm: write tracking ") + to_string(*requested) + " (" + source +
                                       ") is not available with the " + to_string(backend) + " backend: " + why);
}

}  // namespace detail
}  // namespace steppe::vm
