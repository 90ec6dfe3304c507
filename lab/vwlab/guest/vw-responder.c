/* vw-responder: the lab guest's traffic responder.
 *
 * Echoes every UDP datagram it receives on PORT back to its sender, with
 * the guest's own receive counter (8 bytes, network order) written over
 * bytes 8..15 of the payload when the payload is at least 16 bytes long.
 * A sender that puts its sequence number in bytes 0..7 then sees both
 * directions: a missing echo whose counter gap is zero was lost on the way
 * back, one with a gap was lost on the way in.
 *
 * A datagram starting with "VWSTATS?" is answered instead with the guest's
 * /proc/net/snmp and /proc/net/dev, so a test can tell a datagram the
 * guest's own kernel dropped from one the network lost.
 *
 * A child process also accepts TCP connections on PORT + 1 and reads and
 * discards what they send (a sink for a TCP flow through a migration,
 * judged by its sender: vwlab.tcp_probe), one process a connection.
 *
 * With a second argument IP:PORT:MICROSECONDS a child process also sends a
 * beacon from the guest: a datagram with a sequence number (8 bytes,
 * network order) every MICROSECONDS to IP:PORT, so that the guest sends on
 * its own (a migrated guest whose QEMU sends no announce is then first
 * heard by its data).
 *
 * Static, no dependencies: it runs from a busybox initramfs.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

/* Sends a sequenced datagram to spec "IP:PORT:US" every US microseconds,
 * on absolute deadlines (a late wake-up does not shift the ones after). */
static void beacon(const char *spec)
{
    char ip[64];
    unsigned port, us;
    if (sscanf(spec, "%63[0-9.]:%u:%u", ip, &port, &us) != 3 || !us) {
        fprintf(stderr, "vw-responder: bad beacon %s\n", spec);
        exit(1);
    }
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {0};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    inet_pton(AF_INET, ip, &to.sin_addr);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (uint64_t seq = 0;; seq++) {
        unsigned char buf[16] = {0};
        for (int i = 0; i < 8; i++)
            buf[i] = (unsigned char)(seq >> (56 - 8 * i));
        sendto(s, buf, sizeof buf, 0, (struct sockaddr *)&to, sizeof to);
        next.tv_nsec += (long)us * 1000;
        while (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
}

/* Accepts TCP connections on port, each read to its end and discarded. */
static void tcp_sink(int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0 ||
        listen(s, 16) < 0) {
        perror("vw-responder: tcp sink");
        return;
    }
    signal(SIGCHLD, SIG_IGN);           /* no zombies */
    static char buf[1 << 16];
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0)
            continue;
        if (fork() == 0) {
            while (read(c, buf, sizeof buf) > 0)
                ;
            _exit(0);
        }
        close(c);
    }
}

/* Appends file path to buf (at most cap bytes in all); returns the length. */
static size_t append_file(const char *path, char *buf, size_t len, size_t cap)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return len;
    ssize_t n;
    while (len < cap && (n = read(fd, buf + len, cap - len)) > 0)
        len += (size_t)n;
    close(fd);
    return len;
}

int main(int argc, char **argv)
{
    int port = argc > 1 ? atoi(argv[1]) : 7000;
    if (argc > 2 && fork() == 0) {
        beacon(argv[2]);
        return 0;
    }
    if (fork() == 0) {
        tcp_sink(port + 1);
        return 0;
    }
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("vw-responder: bind");
        return 1;
    }
    /* One socket serves every NIC: a guest that stalls for a moment (TCG,
     * just after a migration) must not drop for lack of socket buffer. */
    int rcvbuf = 8 << 20;
    if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0)
        setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    fprintf(stderr, "vw-responder: echoing UDP on port %d\n", port);
    uint64_t received = 0;
    unsigned char buf[65536];
    for (;;) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(s, buf, sizeof buf, 0,
                             (struct sockaddr *)&from, &fl);
        if (n < 0)
            continue;
        if (n >= 8 && memcmp(buf, "VWSTATS?", 8) == 0) {
            size_t len = append_file("/proc/net/snmp", (char *)buf, 0, 32768);
            len = append_file("/proc/net/dev", (char *)buf, len, 65000);
            sendto(s, buf, len, 0, (struct sockaddr *)&from, fl);
            continue;
        }
        received++;
        if (n >= 16) {
            for (int i = 0; i < 8; i++)
                buf[8 + i] = (unsigned char)(received >> (56 - 8 * i));
        }
        sendto(s, buf, (size_t)n, 0, (struct sockaddr *)&from, fl);
    }
}
