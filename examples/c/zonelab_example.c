/*
 * A complete C program on the zonelab C library: it opens an emulated ZNS device in virtual time, writes,
 * appends, reads back, reports zones, finishes and resets, checks the error paths, then opens a real-time
 * device and appends to it from two threads at once. It exits 0 when every check passes.
 *
 * Build (from the repository root, after `cargo build -p zonelab-capi`):
 *   cc examples/c/zonelab_example.c -Iinclude -Ltarget/debug -lzonelab -Wl,-rpath,target/debug -lpthread
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zonelab.h"

#define CHECK(call, want)                                                                             \
    do {                                                                                              \
        int32_t got_ = (call);                                                                        \
        if (got_ != (want)) {                                                                         \
            fprintf(stderr, "%s:%d: %s returned %d (%s), wanted %d\n", __FILE__, __LINE__, #call,     \
                    got_, zl_strerror(got_), (want));                                                 \
            exit(1);                                                                                  \
        }                                                                                             \
    } while (0)

static uint64_t realtime_device;

/* Submits 32 appends to the zone given, tagged (zone start << 8 | i), without waiting for them. */
static void *async_submitter(void *arg) {
    uint64_t zslba = *(uint64_t *)arg;
    static uint8_t block[4096];
    for (uint64_t i = 0; i < 32; i++) {
        zl_io io = {.opcode = ZL_OP_APPEND, .nlb = 1, .slba = zslba, .buf = block};
        CHECK(zl_submit(realtime_device, &io, zslba << 8 | i), ZL_OK);
    }
    return NULL;
}

/* Appends 64 blocks, one at a time, to the zone given; returns the number that landed inside it. */
static void *appender(void *arg) {
    uint64_t zslba = *(uint64_t *)arg;
    uint8_t block[4096];
    memset(block, 0x5a, sizeof block);
    for (int i = 0; i < 64; i++) {
        uint64_t lba = 0;
        CHECK(zl_append(realtime_device, zslba, 1, block, &lba), ZL_OK);
        if (lba < zslba) {
            fprintf(stderr, "append landed at %llu, before its zone\n", (unsigned long long)lba);
            exit(1);
        }
    }
    return NULL;
}

int main(void) {
    uint64_t dev = 0;
    CHECK(zl_open("preset:zn540,zones=8,max-open=2", ZL_MODE_VIRTUAL, &dev), ZL_OK);

    zl_geometry geometry;
    CHECK(zl_get_geometry(dev, &geometry), ZL_OK);
    if (geometry.nr_zones != 8 || geometry.lba_size_bytes != 4096 || geometry.max_open_zones != 2) {
        fprintf(stderr, "unexpected geometry: %u zones of %u-byte blocks\n", geometry.nr_zones,
                geometry.lba_size_bytes);
        return 1;
    }
    uint64_t zone1 = geometry.zone_size_lba;

    /* Write at zone 0's write pointer and read it back. */
    uint8_t out[2 * 4096], in[2 * 4096];
    for (size_t i = 0; i < sizeof out; i++) out[i] = (uint8_t)i;
    CHECK(zl_write(dev, 0, 2, out), ZL_OK);
    CHECK(zl_read(dev, 0, 2, in), ZL_OK);
    if (memcmp(in, out, sizeof out) != 0) {
        fprintf(stderr, "read back other data than written\n");
        return 1;
    }

    /* Zone append returns where the data landed. */
    uint64_t lba = 0;
    CHECK(zl_append(dev, zone1, 1, out, &lba), ZL_OK);
    CHECK(zl_append(dev, zone1, 1, out, &lba), ZL_OK);
    if (lba != zone1 + 1) {
        fprintf(stderr, "second append landed at %llu\n", (unsigned long long)lba);
        return 1;
    }

    /* Report: zone 0 implicitly opened with its write pointer after two blocks. */
    zl_zone zones[8];
    uint32_t nr = 8;
    CHECK(zl_report_zones(dev, 0, zones, &nr), ZL_OK);
    if (nr != 8 || zones[0].cond != 2 || zones[0].wp_lba != 2 || zones[1].wp_lba != zone1 + 2) {
        fprintf(stderr, "report: %u zones, zone 0 cond %u wp %llu\n", nr, zones[0].cond,
                (unsigned long long)zones[0].wp_lba);
        return 1;
    }

    /* Error paths: NVMe statuses with their names, library errors. */
    CHECK(zl_write(dev, 0, 1, out), 0x1bc); /* not the write pointer: Zone Invalid Write */
    if (strcmp(zl_strerror(0x1bc), "Zone Invalid Write") != 0) return 1;
    CHECK(zl_read(dev, geometry.namespace_size_lba, 1, in), 0x080); /* LBA Out of Range */
    CHECK(zl_zone_mgmt(dev, 99, 0, 0), ZL_EINVAL);
    CHECK(zl_write(dev, 0, 1, NULL), ZL_EINVAL);
    CHECK(zl_get_geometry(12345678, &geometry), ZL_EHANDLE);
    uint64_t bad = 0;
    CHECK(zl_open("preset:zn999", ZL_MODE_VIRTUAL, &bad), ZL_EOPEN);
    CHECK(zl_open("/nonexistent/zonelab-image", ZL_MODE_REALTIME, &bad), ZL_EOPEN);

    /* Finish zone 0 (writes then fail: Zone Is Full), reset it, write again from its start. */
    CHECK(zl_zone_mgmt(dev, ZL_ZONE_FINISH, 0, 0), ZL_OK);
    CHECK(zl_write(dev, 2, 1, out), 0x1b9);
    CHECK(zl_zone_mgmt(dev, ZL_ZONE_RESET, 0, 0), ZL_OK);
    CHECK(zl_write(dev, 0, 1, out), ZL_OK);
    CHECK(zl_zone_mgmt(dev, ZL_ZONE_RESET, 0, 1), ZL_OK); /* every zone */

    /* The asynchronous interface in virtual time: submit with tags, poll the completions (the clock jumps). */
    uint8_t readback[4096];
    zl_io ios[3] = {
        {.opcode = ZL_OP_WRITE, .nlb = 1, .slba = 0, .buf = out},
        {.opcode = ZL_OP_APPEND, .nlb = 1, .slba = zone1, .buf = out},
        {.opcode = ZL_OP_ZONE_MGMT, .slba = 2 * zone1, .action = ZL_ZONE_OPEN},
    };
    for (uint64_t t = 0; t < 3; t++) CHECK(zl_submit(dev, &ios[t], 100 + t), ZL_OK);
    zl_completion done[8];
    uint32_t got = 0;
    CHECK(zl_poll(dev, done, 8, &got), ZL_OK);
    if (got != 3) {
        fprintf(stderr, "virtual-time poll returned %u completions\n", got);
        return 1;
    }
    for (uint32_t i = 0; i < got; i++) {
        if (done[i].status != ZL_OK || done[i].tag < 100 || done[i].tag > 102) return 1;
        if (done[i].tag == 101 && done[i].lba != zone1) return 1; /* the append landed at the zone start */
    }
    zl_io read_io = {.opcode = ZL_OP_READ, .nlb = 1, .slba = 0, .buf = readback};
    CHECK(zl_submit(dev, &read_io, 7), ZL_OK);
    zl_io bad_io = {.opcode = ZL_OP_WRITE, .nlb = 1, .slba = 5, .buf = out};
    CHECK(zl_submit(dev, &bad_io, 8), ZL_OK);
    CHECK(zl_poll(dev, done, 8, &got), ZL_OK);
    if (got != 2 || memcmp(readback, out, 4096) != 0) {
        fprintf(stderr, "asynchronous read: %u completions, data %s\n", got,
                memcmp(readback, out, 4096) ? "differs" : "matches");
        return 1;
    }
    for (uint32_t i = 0; i < got; i++)
        if (done[i].tag == 8 && done[i].status != 0x1bc) return 1; /* not the write pointer */
    CHECK(zl_submit(dev, NULL, 9), ZL_EINVAL);
    CHECK(zl_flush(dev), ZL_OK);
    CHECK(zl_close(dev), ZL_OK);
    CHECK(zl_flush(dev), ZL_EHANDLE); /* stale */

    /* Real time: two threads append to two zones of one device at once. */
    CHECK(zl_open("preset:zn540,zones=8", ZL_MODE_REALTIME, &realtime_device), ZL_OK);
    CHECK(zl_get_geometry(realtime_device, &geometry), ZL_OK);
    uint64_t starts[2] = {0, geometry.zone_size_lba};
    pthread_t threads[2];
    for (int t = 0; t < 2; t++) pthread_create(&threads[t], NULL, appender, &starts[t]);
    for (int t = 0; t < 2; t++) pthread_join(threads[t], NULL);
    nr = 2;
    CHECK(zl_report_zones(realtime_device, 0, zones, &nr), ZL_OK);
    if (nr != 2 || zones[0].wp_lba != 64 || zones[1].wp_lba != geometry.zone_size_lba + 64) {
        fprintf(stderr, "after concurrent appends: write pointers %llu and %llu\n",
                (unsigned long long)zones[0].wp_lba, (unsigned long long)zones[1].wp_lba);
        return 1;
    }

    /* Two threads submit appends at once; the completions are polled here as they arrive. */
    uint64_t async_starts[2] = {2 * geometry.zone_size_lba, 3 * geometry.zone_size_lba};
    for (int t = 0; t < 2; t++) pthread_create(&threads[t], NULL, async_submitter, &async_starts[t]);
    for (int t = 0; t < 2; t++) pthread_join(threads[t], NULL);
    uint8_t seen[2][32] = {{0}};
    uint32_t total = 0;
    while (total < 64) {
        zl_completion batch[16];
        uint32_t n = 0;
        CHECK(zl_poll(realtime_device, batch, 16, &n), ZL_OK);
        for (uint32_t i = 0; i < n; i++) {
            uint64_t zone_start = batch[i].tag >> 8, index = batch[i].tag & 0xff;
            int which = zone_start == async_starts[1];
            if (batch[i].status != ZL_OK || index >= 32 || seen[which][index]++ ||
                batch[i].lba < zone_start || batch[i].lba >= zone_start + 32) {
                fprintf(stderr, "bad completion: tag %llx status %d lba %llu\n", (unsigned long long)batch[i].tag,
                        batch[i].status, (unsigned long long)batch[i].lba);
                return 1;
            }
        }
        total += n;
    }
    /* Statistics as JSON: too small a buffer says how much is needed (an idle device's text stays as it is). */
    size_t needed = 0;
    CHECK(zl_stats_json(realtime_device, NULL, 0, &needed), ZL_EINVAL);
    char *stats = malloc(needed);
    CHECK(zl_stats_json(realtime_device, stats, needed, &needed), ZL_OK);
    if (strstr(stats, "\"appends\":192") == NULL || strstr(stats, "\"energy_j_total\"") == NULL) {
        fprintf(stderr, "statistics: %s\n", stats);
        return 1;
    }
    free(stats);
    CHECK(zl_close(realtime_device), ZL_OK);
    printf("zonelab C example: all checks passed\n");
    return 0;
}
