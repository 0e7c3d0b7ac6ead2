/*
 * Appends blocks to a zonelab image through the C library until it is killed: every block holds its own LBA
 * in every 8-byte word, and each acknowledged append's LBA is printed (and flushed) on its own line. The
 * crash test kills this program at random instants and checks that every printed LBA reads back.
 */
#include <stdio.h>
#include <stdlib.h>

#include "zonelab.h"

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    uint64_t dev = 0;
    int32_t status = zl_open(argv[1], ZL_MODE_VIRTUAL, &dev);
    if (status != ZL_OK) {
        fprintf(stderr, "open: %s\n", zl_strerror(status));
        return 1;
    }
    zl_geometry geometry;
    if (zl_get_geometry(dev, &geometry) != ZL_OK) return 1;
    uint64_t *block = malloc(geometry.lba_size_bytes);
    for (uint32_t zone = 0; zone < geometry.nr_zones; zone++) {
        uint64_t zslba = zone * geometry.zone_size_lba;
        for (;;) {
            zl_zone report[1];
            uint32_t nr = 1;
            if (zl_report_zones(dev, zslba, report, &nr) != ZL_OK) return 1;
            uint64_t next = report[0].wp_lba;
            for (uint32_t word = 0; word < geometry.lba_size_bytes / 8; word++) block[word] = next;
            uint64_t lba = 0;
            status = zl_append(dev, zslba, 1, (const uint8_t *)block, &lba);
            if (status == 0x1b9) break; /* Zone Is Full: the next zone */
            if (status != ZL_OK || lba != next) {
                fprintf(stderr, "append: %s at %llu\n", zl_strerror(status), (unsigned long long)lba);
                return 1;
            }
            printf("%llu\n", (unsigned long long)lba);
            fflush(stdout);
        }
    }
    return zl_close(dev) == ZL_OK ? 0 : 1;
}
