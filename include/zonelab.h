/*
 * zonelab: an emulated ZNS SSD for C programs.
 *
 * Every function returns ZL_OK (0), a positive NVMe status code ((SCT << 8) | SC, e.g. 0x1bc Zone Invalid
 * Write), or a negative ZL_E* library error; zl_strerror names any of them. Units are in the names
 * (_lba: logical blocks, _bytes: bytes). Buffers belong to the caller; the library copies what it needs.
 * Thread safety: a real-time handle (ZL_MODE_REALTIME) may be used from any thread; a virtual-time handle
 * only from the thread that opened it (elsewhere: ZL_EHANDLE).
 */

#ifndef ZONELAB_H
#define ZONELAB_H

/* Generated from crates/capi/src/lib.rs by cbindgen; do not edit. */

#include <stdint.h>

/**
 * Success.
 */
#define ZL_OK 0

/**
 * A null, closed or unknown device handle (or a virtual-time handle used from another thread).
 */
#define ZL_EHANDLE -1

/**
 * A null pointer, a string that is not UTF-8, or a value out of range.
 */
#define ZL_EINVAL -2

/**
 * The device could not be opened (missing or corrupt image, unknown preset, bad override).
 */
#define ZL_EOPEN -3

/**
 * A bug inside zonelab (a panic, caught at the boundary).
 */
#define ZL_EINTERNAL -4

/**
 * Virtual time: each call runs the simulation until its command completes.
 */
#define ZL_MODE_VIRTUAL 0

/**
 * Real time: a device thread delivers completions at their modelled wall-clock times.
 */
#define ZL_MODE_REALTIME 1

/**
 * Zone Management Send actions, as NVMe numbers them.
 */
#define ZL_ZONE_CLOSE 1

#define ZL_ZONE_FINISH 2

#define ZL_ZONE_OPEN 3

#define ZL_ZONE_RESET 4

/**
 * Kinds of namespace in `zl_geometry`.
 */
#define ZL_NS_ZONED 0

#define ZL_NS_CONVENTIONAL 1

/**
 * Opcodes of `zl_io`.
 */
#define ZL_OP_READ 2

#define ZL_OP_WRITE 1

#define ZL_OP_APPEND 125

#define ZL_OP_FLUSH 0

#define ZL_OP_ZONE_MGMT 121

/**
 * Dataset Management's deallocate of `nlb` blocks from `slba`: a conventional namespace's trim.
 */
#define ZL_OP_DEALLOCATE 9

/**
 * What Identify tells a host about the namespace.
 */
typedef struct zl_geometry {
  uint32_t lba_size_bytes;
  uint32_t nr_zones;
  uint64_t zone_size_lba;
  uint64_t zone_capacity_lba;
  uint64_t namespace_size_lba;
  /**
   * 0: no limit.
   */
  uint32_t max_open_zones;
  /**
   * 0: no limit.
   */
  uint32_t max_active_zones;
  /**
   * Largest zone append, in bytes; 0: no limit beyond MDTS.
   */
  uint64_t zasl_bytes;
  /**
   * Largest data transfer, in bytes; 0: no limit.
   */
  uint64_t mdts_bytes;
  /**
   * `ZL_NS_ZONED`, or `ZL_NS_CONVENTIONAL` for a namespace of the NVM command set (`ns=` in the spec): one
   * randomly writable range, reported as one zone of the namespace's size that is always full.
   */
  uint32_t kind;
} zl_geometry;

/**
 * One zone of a report, with libzbd's field names and units in the names.
 */
typedef struct zl_zone {
  uint64_t start_lba;
  uint64_t len_lba;
  uint64_t capacity_lba;
  /**
   * The write pointer; all ones where NVMe reports none (FULL, READ_ONLY, OFFLINE).
   */
  uint64_t wp_lba;
  /**
   * Zone state as NVMe encodes it: 1 EMPTY, 2 IMPLICITLY OPENED, 3 EXPLICITLY OPENED, 4 CLOSED, 0xd READ
   * ONLY, 0xe FULL, 0xf OFFLINE.
   */
  uint8_t cond;
  /**
   * Zone attributes (bit 0: Zone Finished by Controller).
   */
  uint8_t attrs;
} zl_zone;

/**
 * One command for `zl_submit`. The buffer stays the caller's and must stay valid until the command's
 * completion has been returned by `zl_poll` (a read's data is copied into it then).
 */
typedef struct zl_io {
  /**
   * `ZL_OP_*`.
   */
  uint32_t opcode;
  /**
   * Blocks to read, write or append.
   */
  uint32_t nlb;
  /**
   * The LBA (read, write), the zone start (append, zone management).
   */
  uint64_t slba;
  /**
   * Data to write or append, or room for the data read; null for flush and zone management.
   */
  uint8_t *buf;
  /**
   * `ZL_ZONE_*` for zone management.
   */
  uint32_t action;
  /**
   * Non-zero: zone management on every zone.
   */
  uint32_t all;
} zl_io;

/**
 * One completion from `zl_poll`.
 */
typedef struct zl_completion {
  /**
   * The caller's tag from `zl_submit`.
   */
  uint64_t tag;
  /**
   * `ZL_OK`, an NVMe status code or a `ZL_E*` error.
   */
  int32_t status;
  /**
   * For an append: the LBA the data landed at.
   */
  uint64_t lba;
} zl_completion;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/**
 * The calling thread's last failure of a `zl_*` or `zlfs_*` call that says why (a device that could not be
 * opened: the preset, image or override at fault), in words; empty if none. Valid until its next failure.
 */
const char *zl_last_error(void);

/**
 * Opens the device `spec` names (`preset:NAME[,key=value...]` or an image path) in `mode`
 * (`ZL_MODE_VIRTUAL` or `ZL_MODE_REALTIME`) and stores its handle in `*handle`. The device keeps data in
 * memory for a preset, in the image for an image. A virtual-time handle may be used only from the thread that
 * opened it; a real-time handle from any thread. Close it with `zl_close`.
 *
 * # Safety
 * `spec` is a NUL-terminated string or null; `handle` points to a writable `uint64_t` or is null.
 */
int32_t zl_open(const char *spec,
                uint32_t mode,
                uint64_t *handle);

/**
 * Closes a device: waits for its commands, flushes it (an image keeps every completed write) and releases
 * the handle, which is stale from then on.
 */
int32_t zl_close(uint64_t handle);

/**
 * Fills `*geometry` with the namespace's geometry and limits.
 *
 * # Safety
 * `geometry` points to a writable `zl_geometry` or is null.
 */
int32_t zl_get_geometry(uint64_t handle, struct zl_geometry *geometry);

/**
 * Reports up to `*nr_zones` zones from the zone holding `start_lba` into `zones`, and sets `*nr_zones` to how
 * many it wrote.
 *
 * # Safety
 * `zones` points to `*nr_zones` writable `zl_zone`s; `nr_zones` is writable. Either may be null only if the
 * other is too (an error).
 */
int32_t zl_report_zones(uint64_t handle,
                        uint64_t start_lba,
                        struct zl_zone *zones,
                        uint32_t *nr_zones);

/**
 * Reads `nlb` blocks at `slba` into `buf` (`nlb` x the LBA size bytes).
 *
 * # Safety
 * `buf` points to `nlb * lba_size_bytes` writable bytes.
 */
int32_t zl_read(uint64_t handle, uint64_t slba, uint32_t nlb, uint8_t *buf);

/**
 * Writes `nlb` blocks from `buf` at `slba`, which must be the zone's write pointer.
 *
 * # Safety
 * `buf` points to `nlb * lba_size_bytes` readable bytes.
 */
int32_t zl_write(uint64_t handle, uint64_t slba, uint32_t nlb, const uint8_t *buf);

/**
 * Zone Append of `nlb` blocks from `buf` to the zone starting at `zslba`; the LBA the data landed at goes to
 * `*lba` (which may be null).
 *
 * # Safety
 * `buf` points to `nlb * lba_size_bytes` readable bytes; `lba` is writable or null.
 */
int32_t zl_append(uint64_t handle,
                  uint64_t zslba,
                  uint32_t nlb,
                  const uint8_t *buf,
                  uint64_t *lba);

/**
 * Flush: every completed write becomes durable.
 */
int32_t zl_flush(uint64_t handle);

/**
 * Dataset Management's deallocate of `nlb` blocks from `slba` (a conventional namespace's trim): they read as
 * zeros afterwards. A zoned namespace refuses it: the NVMe status Invalid Opcode (1) is returned.
 */
int32_t zl_deallocate(uint64_t handle,
                      uint64_t slba,
                      uint64_t nlb);

/**
 * Zone Management Send: `action` (`ZL_ZONE_OPEN`, `_CLOSE`, `_FINISH`, `_RESET`) on the zone starting at
 * `zslba`, or with `all` non-zero on every zone the action applies to.
 */
int32_t zl_zone_mgmt(uint64_t handle,
                     uint32_t action,
                     uint64_t zslba,
                     uint32_t all);

/**
 * Submits `*io` under the caller's `tag` and returns at once; `zl_poll` returns its completion. Write and
 * append data are copied now; a read's buffer must stay valid until its completion is polled.
 *
 * # Safety
 * `io` points to a valid `zl_io` whose `buf` holds (or has room for) `nlb` blocks.
 */
int32_t zl_submit(uint64_t handle,
                  const struct zl_io *io,
                  uint64_t tag);

/**
 * Moves up to `max` completed commands into `completions` and sets `*count` to how many; returns at once
 * (real time) or after running the simulation until its submitted commands complete (virtual time). A
 * handle's completions go to whichever thread polls it.
 *
 * # Safety
 * `completions` points to `max` writable `zl_completion`s; `count` is writable.
 */
int32_t zl_poll(uint64_t handle,
                struct zl_completion *completions,
                uint32_t max,
                uint32_t *count);

/**
 * As `zl_poll`, but for the commands the calling thread submitted only, and it first waits, asleep, until at
 * least `min` of them have completed (at most `max`), until none is in flight, or until `timeout_ns`
 * nanoseconds have passed (0: no limit); `*count` may then be below `min`. What an I/O engine's "get events"
 * needs when several threads share a device: fio's external engine uses it. A `zl_poll` from another thread
 * never takes its wake-up.
 *
 * # Safety
 * `completions` points to `max` writable `zl_completion`s; `count` is writable.
 */
int32_t zl_poll_wait(uint64_t handle,
                     struct zl_completion *completions,
                     uint32_t max,
                     uint32_t min,
                     uint64_t timeout_ns,
                     uint32_t *count);

/**
 * Writes the device's statistics as a NUL-terminated JSON object into `buf` (`len` bytes): command
 * counters, flash operations by source, total energy in joules and wear (erase counts per block), and for a
 * real-time device how it kept the model's pace (`pacing`: completions, late share, error p50/p99/max). Sets
 * `*needed` to the bytes the whole text takes with its NUL; a `len` below that is `ZL_EINVAL` and writes nothing.
 *
 * # Safety
 * `buf` points to `len` writable bytes (or is null with `len` 0); `needed` is writable.
 */
int32_t zl_stats_json(uint64_t handle,
                      char *buf,
                      size_t len,
                      size_t *needed);

/**
 * Writes how a real-time device has kept the model's pace so far as one NUL-terminated line of text into `buf`
 * (`len` bytes): late share, pacing error p50/p99/max, the wall time its thread could not run, and where that
 * thread runs; what front ends print when a run ends. Sets `*needed` as `zl_stats_json` does; a virtual-time
 * device keeps no pace (`ZL_EINVAL`).
 *
 * # Safety
 * `buf` points to `len` writable bytes (or is null with `len` 0); `needed` is writable.
 */
int32_t zl_pacing_line(uint64_t handle,
                       char *buf,
                       size_t len,
                       size_t *needed);

/**
 * The errno a Linux host would see for any code this library returns: for an NVMe status as the kernel maps
 * it (Too Many Active Zones: EOVERFLOW; Too Many Open Zones: ETOOMANYREFS; any other: EIO), 0 for ZL_OK.
 */
int32_t zl_errno(int32_t code);

/**
 * A static, NUL-terminated description of any code this library returns.
 */
const char *zl_strerror(int32_t code);

/**
 * Mounts zonedfs on the device `spec` names (`preset:NAME[,key=value...]` or an image path), in real time,
 * and stores the mount's handle in `*handle`. `options` (may be null or empty) is `key=value` pairs
 * separated by `&`: `scheduler=none|mq-deadline|zinc` (default mq-deadline, as Linux picks for a zoned disk,
 * or none on the paths that bypass the block layer), `host=kernel|spdk|io_uring|io_uring_cmd` (default
 * kernel), `format=0|1` (format a blank device, default 1), `write_buffer_bytes`, `finish_threshold`,
 * `max_active_zones`, `gc_reserve_zones`; WALs through the WAL library with `wal=zwal|conventional|file`,
 * `wal_buffer_bytes`, `wal_queue_depth`, `wal_barrier_bytes` (ZWAL needs host=spdk or io_uring_cmd); and a load of zone
 * resets beside the file system through the same scheduler (ZINC's workload-level experiment):
 * `reset_pool=N` fills the last N zones at start and leaves them out of the file system, `reset_load=R`
 * resets R of them a second, one at a time. The spec and the options may place the device thread
 * (`device-cpu=N`, `device-sched=fifo|normal`, `device-wait=adaptive|poll`, `device-placement=strict|best-effort`,
 * over the environment's `ZONELAB_DEVICE_*`; docs/realtime.md). A device that holds data but no file system is refused
 * (EUCLEAN); run `zonelab fs mkfs` on it.
 *
 * # Safety
 * `spec` and `options` are NUL-terminated strings or null; `handle` points to a writable `uint64_t`.
 */
int32_t zlfs_mount(const char *spec,
                   const char *options,
                   uint64_t *handle);

/**
 * Unmounts: syncs every file still open for writing, flushes the device, stops it; the handle is stale after.
 */
int32_t zlfs_unmount(uint64_t handle);

/**
 * Opens `name` for writing and stores a file id in `*file`: `append` 0 replaces any file of that name with an
 * empty one (RocksDB's NewWritableFile), 1 appends to it. `lifetime` is RocksDB's write-lifetime hint (0 not
 * set .. 5 extreme): files of similar lifetimes share zones. The creation is durable when this returns.
 *
 * # Safety
 * `name` is a NUL-terminated string; `file` points to a writable `uint64_t`.
 */
int32_t zlfs_open_write(uint64_t handle,
                        const char *name,
                        uint32_t lifetime,
                        uint32_t append,
                        uint64_t *file);

/**
 * Sets the write-lifetime hint (0 not set .. 5 extreme) of a file open for writing, for the data written from
 * now on: RocksDB sets it after it creates the file.
 */
int32_t zlfs_set_lifetime(uint64_t handle,
                          uint64_t file,
                          uint32_t lifetime);

/**
 * Opens `name` for reading and stores its file id in `*file`.
 *
 * # Safety
 * `name` is a NUL-terminated string; `file` points to a writable `uint64_t`.
 */
int32_t zlfs_open_read(uint64_t handle, const char *name, uint64_t *file);

/**
 * Appends `len` bytes to a file open for writing (buffered until a buffer's worth or `zlfs_sync`).
 *
 * # Safety
 * `buf` points to `len` readable bytes.
 */
int32_t zlfs_append(uint64_t handle, uint64_t file, const uint8_t *buf, size_t len);

/**
 * Makes everything appended to the file durable.
 */
int32_t zlfs_sync(uint64_t handle, uint64_t file);

/**
 * Closes a file id (a writer is synced first).
 */
int32_t zlfs_close(uint64_t handle, uint64_t file);

/**
 * Reads up to `len` bytes at `offset` of a file into `buf`; stores the bytes read in `*got` (fewer at the end).
 *
 * # Safety
 * `buf` points to `len` writable bytes; `got` is writable.
 */
int32_t zlfs_read(uint64_t handle,
                  uint64_t file,
                  uint64_t offset,
                  uint8_t *buf,
                  size_t len,
                  size_t *got);

/**
 * Deletes a file (durable on return; its space is reclaimed at its last close).
 *
 * # Safety
 * `name` is a NUL-terminated string.
 */
int32_t zlfs_delete(uint64_t handle, const char *name);

/**
 * Renames a file, replacing any file named `to` (durable on return).
 *
 * # Safety
 * `from` and `to` are NUL-terminated strings.
 */
int32_t zlfs_rename(uint64_t handle, const char *from, const char *to);

/**
 * Creates a directory (EEXIST if it exists).
 *
 * # Safety
 * `path` is a NUL-terminated string.
 */
int32_t zlfs_mkdir(uint64_t handle, const char *path);

/**
 * Removes an empty directory.
 *
 * # Safety
 * `path` is a NUL-terminated string.
 */
int32_t zlfs_rmdir(uint64_t handle, const char *path);

/**
 * What `path` is: stores 0 (nothing), 1 (a file) or 2 (a directory) in `*kind`, and a file's size and
 * modification time (seconds since the epoch) in `*size_bytes` and `*mtime_s` (either may be null).
 *
 * # Safety
 * `path` is a NUL-terminated string; `kind` is writable; `size_bytes` and `mtime_s` are writable or null.
 */
int32_t zlfs_stat(uint64_t handle,
                  const char *path,
                  uint32_t *kind,
                  uint64_t *size_bytes,
                  uint64_t *mtime_s);

/**
 * Writes the names in directory `dir` into `buf` (`len` bytes), each followed by a NUL; sets `*needed` to
 * the bytes all of them take. A `len` below that is ERANGE and writes nothing.
 *
 * # Safety
 * `dir` is a NUL-terminated string; `buf` points to `len` writable bytes (or is null with `len` 0);
 * `needed` is writable.
 */
int32_t zlfs_list(uint64_t handle,
                  const char *dir,
                  char *buf,
                  size_t len,
                  size_t *needed);

/**
 * Stores the bytes that can still be written (empty and partly written zones) in `*free_bytes`.
 *
 * # Safety
 * `free_bytes` is writable.
 */
int32_t zlfs_free_space(uint64_t handle, uint64_t *free_bytes);

/**
 * Writes the mount's counters as a NUL-terminated JSON object into `buf`: the device's (`device`, as
 * `zl_stats_json`: commands, flash operations, energy, wear), how the device kept the model's pace (`pacing`),
 * the file system's (`fs`: bytes written and read,
 * journal commits and rolls, zone resets and finishes, garbage collection) and the reset load's
 * (`reset_load`: resets, mean and largest latency); `*needed` as `zl_stats_json` does.
 *
 * # Safety
 * `buf` points to `len` writable bytes (or is null with `len` 0); `needed` is writable.
 */
int32_t zlfs_stats_json(uint64_t handle,
                        char *buf,
                        size_t len,
                        size_t *needed);

/**
 * The calling thread's last failure of a `zlfs_*` (or `zl_*`) call, in words (empty if none); valid until its
 * next failure. The same as `zl_last_error`.
 */
const char *zlfs_last_error(void);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* ZONELAB_H */
