// delay_proxy — a TCP proxy that delays every chunk by a fixed time in each
// direction, for measuring a store in PostgreSQL behind network latency where
// the kernel has no netem (this machine's has none). Order is kept and
// throughput is not limited unless RATE_MBIT is given: each chunk is sent
// `delay` after it arrived, and with a rate, not before the chunks ahead of
// it have had their time on the link (each direction of each connection a
// link of its own), plus its own.
// Each direction of each connection has a reader thread (stamps chunks as
// they arrive) and a sender thread (sleeps on an absolute CLOCK_MONOTONIC
// deadline, then writes), so delays well under a millisecond hold (a
// Python event loop's timers did not).
//
//   delay_proxy LISTEN_PORT TARGET_HOST TARGET_PORT ONE_WAY_DELAY_MS [RATE_MBIT]
//
// Its own cost is measured by running it with 0 ms.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct chunk {
    timespec due;
    std::string bytes;  // empty: the sender closed its side
};

// One direction: from `in` to `out`, each chunk `delay_ns` late.
class direction {
public:
    direction(int in, int out, long delay_ns, double ns_per_byte)
        : in_(in), out_(out), delay_ns_(delay_ns), ns_per_byte_(ns_per_byte) {}
    void run() {
        std::thread sender([this] { send(); });
        receive();
        sender.join();
    }

private:
    void receive() {
        std::vector<char> buf(1 << 16);
        for (;;) {
            ssize_t n = ::read(in_, buf.data(), buf.size());
            chunk c{due_from_now(), n > 0 ? std::string(buf.data(), std::size_t(n)) : std::string()};
            {
                std::lock_guard hold(lock_);
                queue_.push_back(std::move(c));
            }
            ready_.notify_one();
            if (n <= 0) return;
        }
    }
    void send() {
        timespec link_free{};
        for (;;) {
            chunk c;
            {
                std::unique_lock hold(lock_);
                ready_.wait(hold, [this] { return !queue_.empty(); });
                c = std::move(queue_.front());
                queue_.pop_front();
            }
            if (ns_per_byte_ > 0) {
                if (later(link_free, c.due)) c.due = link_free;
                c.due = plus(c.due, long(double(c.bytes.size()) * ns_per_byte_));
                link_free = c.due;
            }
            while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &c.due, nullptr) == EINTR) {
            }
            if (c.bytes.empty()) {
                ::shutdown(out_, SHUT_WR);
                return;
            }
            for (std::size_t done = 0; done < c.bytes.size();) {
                ssize_t n = ::write(out_, c.bytes.data() + done, c.bytes.size() - done);
                if (n <= 0) return;
                done += std::size_t(n);
            }
        }
    }
    timespec due_from_now() const {
        timespec t;
        ::clock_gettime(CLOCK_MONOTONIC, &t);
        return plus(t, delay_ns_);
    }
    static timespec plus(timespec t, long ns) {
        ns += t.tv_nsec;
        t.tv_sec += ns / 1'000'000'000;
        t.tv_nsec = ns % 1'000'000'000;
        return t;
    }
    static bool later(const timespec& a, const timespec& b) {
        return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec;
    }

    int in_, out_;
    long delay_ns_;
    double ns_per_byte_;  // 0: no rate limit
    std::mutex lock_;
    std::condition_variable ready_;
    std::deque<chunk> queue_;
};

int connect_to(const char* host, const char* port) {
    addrinfo hints{}, *found = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    if (::getaddrinfo(host, port, &hints, &found) != 0) return -1;
    int fd = ::socket(found->ai_family, SOCK_STREAM, 0);
    if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
        ::close(fd);
        fd = -1;
    }
    ::freeaddrinfo(found);
    return fd;
}

void no_delay(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5 && argc != 6) {
        std::fprintf(stderr, "usage: delay_proxy LISTEN_PORT TARGET_HOST TARGET_PORT ONE_WAY_DELAY_MS [RATE_MBIT]\n");
        return 2;
    }
    const long delay_ns = long(std::atof(argv[4]) * 1e6);
    const double ns_per_byte = argc == 6 ? 8e3 / std::atof(argv[5]) : 0;  // 8 bits at RATE_MBIT per microsecond
    int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(std::uint16_t(std::atoi(argv[1])));
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listener, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 || ::listen(listener, 64) != 0) {
        std::perror("delay_proxy: bind/listen");
        return 1;
    }
    for (;;) {
        int client = ::accept(listener, nullptr, nullptr);
        if (client < 0) continue;
        int server = connect_to(argv[2], argv[3]);
        if (server < 0) {
            ::close(client);
            continue;
        }
        no_delay(client);
        no_delay(server);
        std::thread([client, server, delay_ns, ns_per_byte] {
            auto up = std::make_unique<direction>(client, server, delay_ns, ns_per_byte);
            auto down = std::make_unique<direction>(server, client, delay_ns, ns_per_byte);
            std::thread back([&] { down->run(); });
            up->run();
            back.join();
            ::close(client);
            ::close(server);
        }).detach();
    }
}
