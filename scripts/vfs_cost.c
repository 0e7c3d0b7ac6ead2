/* Host CPU per file operation through the Linux VFS and page cache, no device I/O: the costs that
 * crates/bench/src/filebench.rs charges filebench's flowops (docs/logfs.md, "Host CPU").
 * Build and run on a tmpfs (so nothing reaches a device):
 *   cc -O2 -o /tmp/vfs_cost scripts/vfs_cost.c && /tmp/vfs_cost /dev/shm
 * Prints the mean nanoseconds of each operation over many repetitions. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

enum { FILES = 2000, ROUNDS = 20, BIG = 1 << 20 };

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/dev/shm";
    char name[4096];
    static char buf[BIG];
    memset(buf, 7, sizeof buf);
    double create = 0, open_close = 0, stat_ns = 0, unlink_ns = 0, write4k = 0, read1m = 0, write1m = 0;
    long creates = 0, writes4k = 0, reads1m = 0, writes1m = 0;
    for (int round = 0; round < ROUNDS; round++) {
        double t = now_ns();
        for (int i = 0; i < FILES; i++) {
            snprintf(name, sizeof name, "%s/vfs_cost_%d", dir, i);
            int fd = open(name, O_CREAT | O_RDWR | O_TRUNC, 0600);
            if (fd < 0) { perror(name); return 1; }
            close(fd);
        }
        create += now_ns() - t;
        creates += FILES;
        t = now_ns();
        for (int i = 0; i < FILES; i++) {
            snprintf(name, sizeof name, "%s/vfs_cost_%d", dir, i);
            close(open(name, O_RDWR));
        }
        open_close += now_ns() - t;
        t = now_ns();
        for (int i = 0; i < FILES; i++) {
            struct stat st;
            snprintf(name, sizeof name, "%s/vfs_cost_%d", dir, i);
            stat(name, &st);
        }
        stat_ns += now_ns() - t;
        snprintf(name, sizeof name, "%s/vfs_cost_0", dir);
        int fd = open(name, O_RDWR);
        t = now_ns();
        for (int i = 0; i < 4096; i++) {
            if (pwrite(fd, buf, 4096, (off_t)i * 4096) != 4096) { perror("pwrite"); return 1; }
        }
        write4k += now_ns() - t;
        writes4k += 4096;
        t = now_ns();
        for (int i = 0; i < 16; i++) {
            if (pwrite(fd, buf, BIG, (off_t)i * BIG) != BIG) { perror("pwrite"); return 1; }
        }
        write1m += now_ns() - t;
        writes1m += 16;
        t = now_ns();
        for (int i = 0; i < 16; i++) {
            if (pread(fd, buf, BIG, (off_t)i * BIG) != BIG) { perror("pread"); return 1; }
        }
        read1m += now_ns() - t;
        reads1m += 16;
        close(fd);
        t = now_ns();
        for (int i = 0; i < FILES; i++) {
            snprintf(name, sizeof name, "%s/vfs_cost_%d", dir, i);
            unlink(name);
        }
        unlink_ns += now_ns() - t;
    }
    printf("create+close_ns %.0f\nopen+close_ns %.0f\nstat_ns %.0f\nunlink_ns %.0f\n", create / creates,
           open_close / creates, stat_ns / creates, unlink_ns / creates);
    printf("pwrite_4k_ns %.0f\npwrite_1m_ns %.0f (%.2f ns/byte)\npread_1m_ns %.0f (%.2f ns/byte)\n",
           write4k / writes4k, write1m / writes1m, write1m / writes1m / BIG, read1m / reads1m,
           read1m / reads1m / BIG);
    return 0;
}
